package dev.albertedge.core;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;

/**
 * SentencePiece's precompiled normalization rules ({@code nmt_nfkc} for ALBERT): NFKC
 * plus SentencePiece's own whitespace and control-character mapping.
 *
 * <p>Why hand-written: there is no SentencePiece for the JVM without JNI, and
 * {@code java.text.Normalizer}'s NFKC is not the same mapping (the charsmap also turns
 * tabs and newlines into spaces, drops control characters, and was compiled from an older
 * Unicode). So this reads the very rules stored in the {@code .model} file and applies
 * them the way SentencePiece's C++ {@code Normalizer::NormalizePrefix} does, which is what
 * the Python tokenizer calls (via {@code SentencePieceNormalizer} with dummy prefix,
 * whitespace escaping and whitespace removal all off): at each position take the
 * <em>longest</em> rule whose source is a prefix of the remaining UTF-8 bytes and emit its
 * target; where no rule matches, copy one character unchanged.
 *
 * <p>Blob layout ({@code normalizer.cc}, {@code DecodePrecompiledCharsMap}): a
 * little-endian uint32 trie size, that many bytes of a darts-clone double array (uint32
 * units), then the NUL-separated UTF-8 targets the trie's values point into.
 */
public final class PrecompiledCharsmap {
    private final int[] units;
    private final byte[] targets;

    public PrecompiledCharsmap(byte[] blob) {
        if (blob.length <= 4) {
            throw new IllegalArgumentException("precompiled charsmap of " + blob.length + " bytes");
        }
        long trieSize = (blob[0] & 0xFFL)
                | (blob[1] & 0xFFL) << 8
                | (blob[2] & 0xFFL) << 16
                | (blob[3] & 0xFFL) << 24;
        if (trieSize >= blob.length - 4 || trieSize % 4 != 0 || trieSize == 0) {
            throw new IllegalArgumentException(
                    "precompiled charsmap trie size " + trieSize + " does not fit " + blob.length
                            + " bytes");
        }
        units = new int[(int) (trieSize / 4)];
        for (int i = 0; i < units.length; i++) {
            int o = 4 + 4 * i;
            units[i] = (blob[o] & 0xFF)
                    | (blob[o + 1] & 0xFF) << 8
                    | (blob[o + 2] & 0xFF) << 16
                    | (blob[o + 3] & 0xFF) << 24;
        }
        int start = 4 + (int) trieSize;
        targets = new byte[blob.length - start];
        System.arraycopy(blob, start, targets, 0, targets.length);
    }

    // darts-clone DoubleArrayUnit accessors.
    private static boolean hasLeaf(int unit) {
        return ((unit >>> 8) & 1) == 1;
    }

    private static int value(int unit) {
        return unit & 0x7FFFFFFF;
    }

    private static int label(int unit) {
        return unit & 0x800000FF;
    }

    private static int offset(int unit) {
        return (unit >>> 10) << ((unit & (1 << 9)) >>> 6);
    }

    /**
     * Longest rule matching {@code key[from..]}: returns {@code length << 32 | value}, or -1
     * when none matches (darts-clone {@code commonPrefixSearch}, keeping the longest hit).
     */
    long longestMatch(byte[] key, int from) {
        int id = 0;
        if (units.length == 0) {
            return -1;
        }
        id ^= offset(units[0]);
        long best = -1;
        for (int i = from; i < key.length; i++) {
            int c = key[i] & 0xFF;
            id ^= c;
            if (id < 0 || id >= units.length) {
                return best;
            }
            int unit = units[id];
            if (label(unit) != c) {
                return best;
            }
            id ^= offset(unit);
            if (id < 0 || id >= units.length) {
                return best;
            }
            if (hasLeaf(unit)) {
                best = ((long) (i + 1 - from) << 32) | value(units[id]);
            }
        }
        return best;
    }

    /** Applies the rules to {@code text}. */
    public String normalize(String text) {
        if (text.isEmpty()) {
            return text;
        }
        byte[] in = text.getBytes(StandardCharsets.UTF_8);
        ByteArrayOutputStream out = new ByteArrayOutputStream(in.length + 8);
        int pos = 0;
        while (pos < in.length) {
            long hit = longestMatch(in, pos);
            if (hit >= 0) {
                int len = (int) (hit >>> 32);
                int v = (int) (hit & 0xFFFFFFFFL);
                int end = v;
                while (end < targets.length && targets[end] != 0) {
                    end++;
                }
                if (v < targets.length) {
                    out.write(targets, v, end - v);
                }
                pos += len;
            } else {
                int len = utf8Length(in[pos]);
                len = Math.min(len, in.length - pos);
                out.write(in, pos, len);
                pos += len;
            }
        }
        return new String(out.toByteArray(), StandardCharsets.UTF_8);
    }

    private static int utf8Length(byte lead) {
        int b = lead & 0xFF;
        if (b < 0x80) {
            return 1;
        } else if (b >= 0xF0) {
            return 4;
        } else if (b >= 0xE0) {
            return 3;
        } else if (b >= 0xC0) {
            return 2;
        }
        return 1;
    }
}
