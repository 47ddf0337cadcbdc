package dev.albertedge.core;

import static org.junit.Assume.assumeTrue;

import java.io.ByteArrayOutputStream;
import java.io.File;
import java.nio.charset.StandardCharsets;

/** Test helpers: the real ALBERT model, and tiny hand-built {@code .model} files. */
final class TestModels {
    private TestModels() {}

    /** The real 30k-clean.model, from {@code -Dalbert.spiece=...} (the Python test sets it). */
    static File realModelFile() {
        String path = System.getProperty("albert.spiece");
        assumeTrue("set -Dalbert.spiece=<path to 30k-clean.model> to run this test",
                path != null && new File(path).isFile());
        return new File(path);
    }

    private static SentencePieceModel cached;

    static synchronized SentencePieceModel realModel() {
        if (cached == null) {
            cached = SentencePieceModel.load(realModelFile());
        }
        return cached;
    }

    /** A minimal protobuf writer, the inverse of {@link ProtoReader}, for building fixtures. */
    static final class ProtoWriter {
        private final ByteArrayOutputStream out = new ByteArrayOutputStream();

        ProtoWriter varint(long v) {
            while ((v & ~0x7FL) != 0) {
                out.write((int) ((v & 0x7F) | 0x80));
                v >>>= 7;
            }
            out.write((int) v);
            return this;
        }

        ProtoWriter tag(int field, int wire) {
            return varint(((long) field << 3) | wire);
        }

        ProtoWriter varintField(int field, long v) {
            return tag(field, ProtoReader.WIRE_VARINT).varint(v);
        }

        ProtoWriter floatField(int field, float f) {
            tag(field, ProtoReader.WIRE_FIXED32);
            int bits = Float.floatToIntBits(f);
            for (int i = 0; i < 4; i++) {
                out.write((bits >>> (8 * i)) & 0xFF);
            }
            return this;
        }

        ProtoWriter bytesField(int field, byte[] b) {
            tag(field, ProtoReader.WIRE_LENGTH_DELIMITED).varint(b.length);
            out.write(b, 0, b.length);
            return this;
        }

        ProtoWriter stringField(int field, String s) {
            return bytesField(field, s.getBytes(StandardCharsets.UTF_8));
        }

        byte[] bytes() {
            return out.toByteArray();
        }
    }

    /** One piece: text, score, type. */
    static Object[] p(String piece, double score, int type) {
        return new Object[] {piece, (float) score, type};
    }

    /** A ModelProto with these pieces, a trainer spec and no normalizer rules. */
    static byte[] model(int modelType, Object[]... pieces) {
        ProtoWriter w = new ProtoWriter();
        for (Object[] piece : pieces) {
            byte[] sp = new ProtoWriter()
                    .stringField(1, (String) piece[0])
                    .floatField(2, (Float) piece[1])
                    .varintField(3, (Integer) piece[2])
                    .bytes();
            w.bytesField(1, sp);
        }
        byte[] trainer = new ProtoWriter()
                .stringField(2, "ignored-model-prefix")
                .varintField(3, modelType)
                .varintField(40, 1)
                .bytes();
        w.bytesField(2, trainer);
        w.bytesField(3, new ProtoWriter().stringField(1, "identity").bytes());
        return w.bytes();
    }

    /** ALBERT's five specials plus {@code extra}, unigram. */
    static SentencePieceModel tiny(Object[]... extra) {
        Object[][] all = new Object[5 + extra.length][];
        all[0] = p("<pad>", 0, SentencePieceModel.CONTROL);
        all[1] = p("<unk>", 0, SentencePieceModel.UNKNOWN);
        all[2] = p("[CLS]", 0, SentencePieceModel.CONTROL);
        all[3] = p("[SEP]", 0, SentencePieceModel.CONTROL);
        all[4] = p("[MASK]", 0, SentencePieceModel.CONTROL);
        System.arraycopy(extra, 0, all, 5, extra.length);
        return SentencePieceModel.parse(model(SentencePieceModel.MODEL_UNIGRAM, all), "tiny.model");
    }
}
