package dev.albertedge.core;

import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * The parts of a SentencePiece {@code .model} file (a serialized {@code ModelProto}) that
 * tokenization needs: the pieces with their scores and types, the trainer's model type and
 * unk id, and the normalizer's precompiled character map.
 *
 * <p>Field numbers follow {@code sentencepiece_model.proto}: {@code ModelProto.pieces = 1},
 * {@code trainer_spec = 2}, {@code normalizer_spec = 3}; {@code SentencePiece.piece = 1,
 * score = 2, type = 3}; {@code TrainerSpec.model_type = 3, unk_id = 40};
 * {@code NormalizerSpec.name = 1, precompiled_charsmap = 2}. Everything else is skipped.
 */
public final class SentencePieceModel {
    /** {@code SentencePiece.Type} values. */
    public static final int NORMAL = 1;
    public static final int UNKNOWN = 2;
    public static final int CONTROL = 3;
    public static final int USER_DEFINED = 4;
    public static final int UNUSED = 5;
    public static final int BYTE = 6;

    /** {@code TrainerSpec.ModelType} values. */
    public static final int MODEL_UNIGRAM = 1;

    private static final String[] MODEL_TYPE_NAMES = {"?", "UNIGRAM", "BPE", "WORD", "CHAR"};

    private final String source;
    private final List<String> pieces;
    private final float[] scores;
    private final int[] types;
    private final int modelType;
    private final int unkId;
    private final String normalizerName;
    private final byte[] precompiledCharsmap;

    private SentencePieceModel(
            String source,
            List<String> pieces,
            float[] scores,
            int[] types,
            int modelType,
            int unkId,
            String normalizerName,
            byte[] precompiledCharsmap) {
        this.source = source;
        this.pieces = Collections.unmodifiableList(pieces);
        this.scores = scores;
        this.types = types;
        this.modelType = modelType;
        this.unkId = unkId;
        this.normalizerName = normalizerName;
        this.precompiledCharsmap = precompiledCharsmap;
    }

    /** Reads a {@code .model} file from disk. */
    public static SentencePieceModel load(File file) {
        if (!file.isFile()) {
            throw new TokenizerException(
                    file + ": SentencePiece model not found; put the checkpoint's spiece.model "
                            + "(30k-clean.model in original ALBERT releases) there");
        }
        try (InputStream in = new FileInputStream(file)) {
            return load(in, file.getPath());
        } catch (IOException e) {
            throw new TokenizerException(file + ": cannot read (" + e.getMessage() + ")", e);
        }
    }

    /** Reads a model from a stream (an Android asset, say); {@code source} names it in errors. */
    public static SentencePieceModel load(InputStream in, String source) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream(1 << 20);
        byte[] chunk = new byte[1 << 16];
        int n;
        while ((n = in.read(chunk)) > 0) {
            out.write(chunk, 0, n);
        }
        return parse(out.toByteArray(), source);
    }

    /** Parses the bytes of a {@code .model} file; {@code source} names it in errors. */
    public static SentencePieceModel parse(byte[] data, String source) {
        try {
            return parseOrThrow(data, source);
        } catch (IllegalArgumentException e) {
            throw new TokenizerException(
                    source + ": not a readable SentencePiece model (" + e.getMessage()
                            + "); replace it with the checkpoint's original spiece.model",
                    e);
        }
    }

    private static SentencePieceModel parseOrThrow(byte[] data, String source) {
        List<String> pieces = new ArrayList<>();
        List<Float> scores = new ArrayList<>();
        List<Integer> types = new ArrayList<>();
        int modelType = MODEL_UNIGRAM;
        int unkId = 0;
        String normalizerName = "";
        byte[] charsmap = new byte[0];

        ProtoReader r = new ProtoReader(data);
        while (r.hasMore()) {
            int tag = r.readTag();
            int field = ProtoReader.fieldNumber(tag);
            if (field == 1 && ProtoReader.wireType(tag) == ProtoReader.WIRE_LENGTH_DELIMITED) {
                ProtoReader p = r.readMessage();
                String piece = "";
                float score = 0f;
                int type = NORMAL;
                while (p.hasMore()) {
                    int t = p.readTag();
                    int f = ProtoReader.fieldNumber(t);
                    int w = ProtoReader.wireType(t);
                    if (f == 1 && w == ProtoReader.WIRE_LENGTH_DELIMITED) {
                        piece = p.readString();
                    } else if (f == 2 && w == ProtoReader.WIRE_FIXED32) {
                        score = p.readFloat();
                    } else if (f == 3 && w == ProtoReader.WIRE_VARINT) {
                        type = (int) p.readVarint();
                    } else {
                        p.skip(t);
                    }
                }
                pieces.add(piece);
                scores.add(score);
                types.add(type);
            } else if (field == 2 && ProtoReader.wireType(tag) == ProtoReader.WIRE_LENGTH_DELIMITED) {
                ProtoReader t = r.readMessage();
                while (t.hasMore()) {
                    int tt = t.readTag();
                    int f = ProtoReader.fieldNumber(tt);
                    int w = ProtoReader.wireType(tt);
                    if (f == 3 && w == ProtoReader.WIRE_VARINT) {
                        modelType = (int) t.readVarint();
                    } else if (f == 40 && w == ProtoReader.WIRE_VARINT) {
                        unkId = (int) t.readVarint();
                    } else {
                        t.skip(tt);
                    }
                }
            } else if (field == 3 && ProtoReader.wireType(tag) == ProtoReader.WIRE_LENGTH_DELIMITED) {
                ProtoReader ns = r.readMessage();
                while (ns.hasMore()) {
                    int nt = ns.readTag();
                    int f = ProtoReader.fieldNumber(nt);
                    int w = ProtoReader.wireType(nt);
                    if (f == 1 && w == ProtoReader.WIRE_LENGTH_DELIMITED) {
                        normalizerName = ns.readString();
                    } else if (f == 2 && w == ProtoReader.WIRE_LENGTH_DELIMITED) {
                        charsmap = ns.readBytes();
                    } else {
                        ns.skip(nt);
                    }
                }
            } else {
                r.skip(tag);
            }
        }
        if (pieces.isEmpty()) {
            throw new IllegalArgumentException("no pieces found");
        }
        if (modelType != MODEL_UNIGRAM) {
            String name = modelType > 0 && modelType < MODEL_TYPE_NAMES.length
                    ? MODEL_TYPE_NAMES[modelType] : String.valueOf(modelType);
            throw new TokenizerException(
                    source + ": SentencePiece model type " + name + " is not supported; ALBERT "
                            + "uses a UNIGRAM model (use the checkpoint's own spiece.model)");
        }
        if (unkId < 0 || unkId >= pieces.size()) {
            throw new IllegalArgumentException("unk_id " + unkId + " outside the vocabulary");
        }
        float[] s = new float[scores.size()];
        int[] ty = new int[types.size()];
        for (int i = 0; i < s.length; i++) {
            s[i] = scores.get(i);
            ty[i] = types.get(i);
        }
        return new SentencePieceModel(
                source, pieces, s, ty, modelType, unkId, normalizerName, charsmap);
    }

    public String source() {
        return source;
    }

    public int size() {
        return pieces.size();
    }

    public String piece(int id) {
        return pieces.get(id);
    }

    public List<String> pieces() {
        return pieces;
    }

    /** The score as stored (a float32 log-probability). */
    public float score(int id) {
        return scores[id];
    }

    public int type(int id) {
        return types[id];
    }

    public int modelType() {
        return modelType;
    }

    public int unkId() {
        return unkId;
    }

    /** {@code NormalizerSpec.name}, e.g. {@code nmt_nfkc}. */
    public String normalizerName() {
        return normalizerName;
    }

    /** {@code NormalizerSpec.precompiled_charsmap}; empty when the model has none. */
    public byte[] precompiledCharsmap() {
        return precompiledCharsmap.clone();
    }

    /** Id of the first piece equal to {@code piece}, or -1. */
    public int idOf(String piece) {
        return pieces.indexOf(piece);
    }
}
