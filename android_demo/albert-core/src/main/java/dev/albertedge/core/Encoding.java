package dev.albertedge.core;

/**
 * One tokenized example: {@code [CLS] a [SEP] (b [SEP])}, padded with {@code <pad>}.
 *
 * <p>{@code length} counts the real tokens (the ones with attention 1); {@code truncated}
 * says whether tokens were dropped to fit.
 */
public final class Encoding {
    private final int[] inputIds;
    private final int[] attentionMask;
    private final int[] tokenTypeIds;
    private final int length;
    private final boolean truncated;

    Encoding(int[] inputIds, int[] attentionMask, int[] tokenTypeIds, int length, boolean truncated) {
        this.inputIds = inputIds;
        this.attentionMask = attentionMask;
        this.tokenTypeIds = tokenTypeIds;
        this.length = length;
        this.truncated = truncated;
    }

    /**
     * An encoding built by hand (for a smoke-test input, say): three arrays of one length;
     * the real tokens are those with attention 1.
     */
    public static Encoding of(int[] inputIds, int[] attentionMask, int[] tokenTypeIds) {
        if (inputIds.length != attentionMask.length || inputIds.length != tokenTypeIds.length) {
            throw new IllegalArgumentException("input_ids, attention_mask and token_type_ids "
                    + "differ in length (" + inputIds.length + ", " + attentionMask.length + ", "
                    + tokenTypeIds.length + ")");
        }
        int length = 0;
        for (int m : attentionMask) {
            length += m != 0 ? 1 : 0;
        }
        return new Encoding(inputIds.clone(), attentionMask.clone(), tokenTypeIds.clone(), length,
                false);
    }

    public int[] inputIds() {
        return inputIds.clone();
    }

    public int[] attentionMask() {
        return attentionMask.clone();
    }

    public int[] tokenTypeIds() {
        return tokenTypeIds.clone();
    }

    /** Padded width (the sequence length the model is fed). */
    public int width() {
        return inputIds.length;
    }

    /** Real tokens, specials included. */
    public int length() {
        return length;
    }

    public boolean truncated() {
        return truncated;
    }

    /** int64 copies, for models whose inputs are int64 (albert-edge's TFLite signatures). */
    public long[] inputIdsLong() {
        return widen(inputIds);
    }

    public long[] attentionMaskLong() {
        return widen(attentionMask);
    }

    public long[] tokenTypeIdsLong() {
        return widen(tokenTypeIds);
    }

    private static long[] widen(int[] a) {
        long[] out = new long[a.length];
        for (int i = 0; i < a.length; i++) {
            out[i] = a[i];
        }
        return out;
    }
}
