package dev.albertedge.core;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import org.junit.Test;

public class ProtoReaderTest {
    private static byte[] b(int... xs) {
        byte[] out = new byte[xs.length];
        for (int i = 0; i < xs.length; i++) {
            out[i] = (byte) xs[i];
        }
        return out;
    }

    @Test
    public void readsVarintsIncludingMultiByteAndMaximal() {
        ProtoReader r = new ProtoReader(b(0x96, 0x01, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                0xFF, 0xFF, 0xFF, 0x01));
        assertEquals(150, r.readVarint());
        assertEquals(0, r.readVarint());
        assertEquals(-1L, r.readVarint());
        assertFalse(r.hasMore());
    }

    @Test
    public void roundTripsEveryWireTypeAndSkipsUnknownFields() {
        byte[] inner = new TestModels.ProtoWriter().stringField(1, "▁héllo").floatField(2, -2.5f)
                .bytes();
        byte[] msg = new TestModels.ProtoWriter()
                .varintField(7, 300)
                .bytesField(1, inner)
                .floatField(9, 1.0f)
                .tag(10, ProtoReader.WIRE_FIXED64).varint(0).varint(0).varint(0).varint(0)
                .varint(0).varint(0).varint(0).varint(0)
                .varintField(3, 4)
                .bytes();
        ProtoReader r = new ProtoReader(msg);
        int tag = r.readTag();
        assertEquals(7, ProtoReader.fieldNumber(tag));
        r.skip(tag);
        tag = r.readTag();
        assertEquals(1, ProtoReader.fieldNumber(tag));
        assertEquals(ProtoReader.WIRE_LENGTH_DELIMITED, ProtoReader.wireType(tag));
        ProtoReader sub = r.readMessage();
        sub.readTag();
        assertEquals("▁héllo", sub.readString());
        sub.readTag();
        assertEquals(-2.5f, sub.readFloat(), 0f);
        assertFalse(sub.hasMore());
        r.skip(r.readTag());
        r.skip(r.readTag());
        tag = r.readTag();
        assertEquals(3, ProtoReader.fieldNumber(tag));
        assertEquals(4, r.readVarint());
        assertFalse(r.hasMore());
    }

    private static void expectError(byte[] data, String fragment) {
        ProtoReader r = new ProtoReader(data);
        try {
            while (r.hasMore()) {
                r.skip(r.readTag());
            }
            fail("no error for " + fragment);
        } catch (IllegalArgumentException e) {
            assertTrue(e.getMessage(), e.getMessage().contains(fragment));
        }
    }

    @Test
    public void rejectsCorruptInputWithTheOffset() {
        expectError(b(0x08, 0x96), "truncated varint at byte 1");
        expectError(b(0x0A, 0x05, 0x41), "runs past the end");
        expectError(b(0x0B), "unsupported wire type 3");
        expectError(b(0x00), "invalid field tag 0");
        expectError(b(0x0D, 0x01, 0x02), "truncated: need 4 bytes");
    }
}
