package dev.albertedge.core;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Fixed sequence lengths an artifact was exported for (albert-edge's TFLite files carry one
 * signature per length, named {@code seq_<N>}), and the choice of one for an input.
 *
 * <p>Why buckets: a phone pays for every padded position (attention is quadratic in it),
 * so a 12-token sentence should run the 32-long graph, not the 128-long one.
 */
public final class SequenceBuckets {
    private static final Pattern SIGNATURE = Pattern.compile("seq_(\\d{1,6})");

    private SequenceBuckets() {}

    /** The smallest bucket holding {@code needed} tokens, else the largest (input truncated). */
    public static int pick(int[] buckets, int needed) {
        if (buckets.length == 0) {
            throw new IllegalArgumentException("no sequence lengths to choose from");
        }
        int best = -1;
        int largest = -1;
        for (int b : buckets) {
            if (b <= 0) {
                throw new IllegalArgumentException("sequence length " + b + " is not positive");
            }
            largest = Math.max(largest, b);
            if (b >= needed && (best < 0 || b < best)) {
                best = b;
            }
        }
        return best > 0 ? best : largest;
    }

    /** Lengths named by {@code seq_<N>} signature keys, ascending; others are ignored. */
    public static int[] fromSignatureKeys(String[] keys) {
        List<Integer> found = new ArrayList<>();
        for (String k : keys) {
            Matcher m = SIGNATURE.matcher(k);
            if (m.matches()) {
                int n = Integer.parseInt(m.group(1));
                if (n > 0 && !found.contains(n)) {
                    found.add(n);
                }
            }
        }
        int[] out = new int[found.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = found.get(i);
        }
        Arrays.sort(out);
        return out;
    }

    /** The signature key of a length ({@code seq_<N>}). */
    public static String signatureKey(int seqLen) {
        return "seq_" + seqLen;
    }
}
