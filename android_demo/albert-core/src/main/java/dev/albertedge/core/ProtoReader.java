package dev.albertedge.core;

import java.nio.charset.StandardCharsets;

/**
 * A minimal reader of the protobuf wire format: just enough to walk a SentencePiece
 * {@code ModelProto}.
 *
 * <p>Why hand-written: protobuf-java (or -lite) would add a dependency and code
 * generation to an app that needs five fields of one message. The wire format is small
 * and stable (varint, 64-bit, length-delimited, 32-bit; groups are rejected), and every
 * read is bounds-checked so that a corrupt file yields an {@link IllegalArgumentException}
 * naming the byte offset instead of an out-of-bounds crash.
 */
public final class ProtoReader {
    public static final int WIRE_VARINT = 0;
    public static final int WIRE_FIXED64 = 1;
    public static final int WIRE_LENGTH_DELIMITED = 2;
    public static final int WIRE_START_GROUP = 3;
    public static final int WIRE_END_GROUP = 4;
    public static final int WIRE_FIXED32 = 5;

    private final byte[] buf;
    private int pos;
    private final int limit;

    public ProtoReader(byte[] buf) {
        this(buf, 0, buf.length);
    }

    public ProtoReader(byte[] buf, int offset, int limit) {
        if (offset < 0 || limit > buf.length || offset > limit) {
            throw new IllegalArgumentException("bad range [" + offset + ", " + limit + ")");
        }
        this.buf = buf;
        this.pos = offset;
        this.limit = limit;
    }

    public boolean hasMore() {
        return pos < limit;
    }

    public int position() {
        return pos;
    }

    /** The next field's tag ({@code field_number << 3 | wire_type}). */
    public int readTag() {
        int at = pos;
        long tag = readVarint();
        if (tag <= 0 || tag > 0xFFFFFFFFL || (tag >>> 3) == 0) {
            throw new IllegalArgumentException("invalid field tag " + tag + " at byte " + at);
        }
        return (int) tag;
    }

    public static int fieldNumber(int tag) {
        return tag >>> 3;
    }

    public static int wireType(int tag) {
        return tag & 7;
    }

    public long readVarint() {
        int at = pos;
        long result = 0;
        for (int shift = 0; shift < 64; shift += 7) {
            if (pos >= limit) {
                throw new IllegalArgumentException("truncated varint at byte " + at);
            }
            byte b = buf[pos++];
            result |= (long) (b & 0x7F) << shift;
            if ((b & 0x80) == 0) {
                return result;
            }
        }
        throw new IllegalArgumentException("varint longer than 10 bytes at byte " + at);
    }

    public int readFixed32() {
        need(4);
        int v = (buf[pos] & 0xFF)
                | (buf[pos + 1] & 0xFF) << 8
                | (buf[pos + 2] & 0xFF) << 16
                | (buf[pos + 3] & 0xFF) << 24;
        pos += 4;
        return v;
    }

    public long readFixed64() {
        long lo = readFixed32() & 0xFFFFFFFFL;
        long hi = readFixed32() & 0xFFFFFFFFL;
        return lo | hi << 32;
    }

    public float readFloat() {
        return Float.intBitsToFloat(readFixed32());
    }

    /** Length of the next length-delimited value, checked against the remaining bytes. */
    private int readLength() {
        int at = pos;
        long len = readVarint();
        if (len < 0 || len > limit - pos) {
            throw new IllegalArgumentException(
                    "length " + len + " at byte " + at + " runs past the end (" + limit + ")");
        }
        return (int) len;
    }

    public byte[] readBytes() {
        int len = readLength();
        byte[] out = new byte[len];
        System.arraycopy(buf, pos, out, 0, len);
        pos += len;
        return out;
    }

    public String readString() {
        int len = readLength();
        String s = new String(buf, pos, len, StandardCharsets.UTF_8);
        pos += len;
        return s;
    }

    /** A reader over the embedded message that comes next; this reader skips past it. */
    public ProtoReader readMessage() {
        int len = readLength();
        ProtoReader sub = new ProtoReader(buf, pos, pos + len);
        pos += len;
        return sub;
    }

    /** Skips the value of a field we do not need. */
    public void skip(int tag) {
        switch (wireType(tag)) {
            case WIRE_VARINT:
                readVarint();
                break;
            case WIRE_FIXED64:
                need(8);
                pos += 8;
                break;
            case WIRE_LENGTH_DELIMITED:
                int len = readLength();
                pos += len;
                break;
            case WIRE_FIXED32:
                need(4);
                pos += 4;
                break;
            default:
                throw new IllegalArgumentException(
                        "unsupported wire type " + wireType(tag) + " (field "
                                + fieldNumber(tag) + ") before byte " + pos);
        }
    }

    private void need(int n) {
        if (limit - pos < n) {
            throw new IllegalArgumentException(
                    "truncated: need " + n + " bytes at byte " + pos + ", have " + (limit - pos));
        }
    }
}
