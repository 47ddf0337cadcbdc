package dev.albertedge.core;

import java.util.Arrays;

/**
 * Dynamic exit: step ALBERT's shared layer and stop each row when its policy says so.
 *
 * <p>The Java mirror of {@code albert_edge.early_exit.policy} and of the Python runners'
 * loop; {@code tests/test_android_java.py} runs it on per-exit logits that ONNX Runtime
 * computed for every SST-2 dev sentence and requires the same exit depth and label for every
 * one. The model itself stays behind {@link LayerStepper}: on Android, a LiteRT interpreter
 * whose signatures run the embedding, one layer (weights stored once, run up to L times)
 * and the exit heads.
 *
 * <p>Rules, for one row after exit {@code k} (1-based) of {@code L}: {@link Policy#off()}
 * never stops early (exit L is the model's own head: the full-depth model);
 * {@link Policy#confidence(double)} stops when the largest softmax probability
 * ({@link Postprocess#softmax}, float32-rounded) is {@code >=} the threshold;
 * {@link Policy#patience(int)} (PABEE) stops when the argmax has been unchanged for
 * {@code t} consecutive steps. The last exit always stops.
 *
 * <p>Batches: every row exits on its own. Rows that stop keep that exit's logits and are
 * dropped from the batch ({@link LayerStepper#keepRows}), so later layers only run on the
 * rows still active; a row's result does not depend on the rows it is batched with.
 */
public final class EarlyExit {
    private EarlyExit() {}

    /**
     * A model that can be run one shared layer at a time. {@code H} is the stepper's state
     * for a batch (hidden states and attention mask); the loop never looks inside it.
     */
    public interface LayerStepper<H> {
        /** Number of exits = number of layers L. */
        int numExits();

        /** Embeddings (and the projection to the hidden size) of a padded batch. */
        H embed(int[][] inputIds, int[][] attentionMask, int[][] tokenTypeIds);

        /** Runs layer {@code layer} (1-based; its hidden group's weights) on every row. */
        H step(int layer, H state);

        /** Exit {@code exit}'s logits for every row of {@code state}: [rows][labels]. */
        float[][] exitLogits(int exit, H state);

        /** The state of the given rows only (indices into {@code state}'s rows, ascending). */
        H keepRows(H state, int[] rows);
    }

    /** When a row may stop. */
    public static final class Policy {
        final String kind;
        final double threshold;
        final int patience;

        private Policy(String kind, double threshold, int patience) {
            this.kind = kind;
            this.threshold = threshold;
            this.patience = patience;
        }

        /** Every layer: the full-depth model. */
        public static Policy off() {
            return new Policy("off", 0.0, 0);
        }

        /** Stop once the largest softmax probability is at least {@code threshold}. */
        public static Policy confidence(double threshold) {
            if (!(threshold > 0.0 && threshold <= 1.0)) {
                throw new IllegalArgumentException(
                        "confidence threshold " + threshold + " must be in (0, 1]; e.g. 0.9");
            }
            return new Policy("confidence", threshold, 0);
        }

        /** Stop once the argmax has been unchanged for {@code patience} steps (PABEE). */
        public static Policy patience(int patience) {
            if (patience < 1) {
                throw new IllegalArgumentException("patience " + patience + " must be >= 1; e.g. 2");
            }
            return new Policy("patience", 0.0, patience);
        }

        /** {@code off}, {@code confidence:TAU} or {@code patience:T}, as Python spells them. */
        public static Policy parse(String text) {
            String s = text.trim();
            int colon = s.indexOf(':');
            String kind = colon < 0 ? s : s.substring(0, colon);
            String value = colon < 0 ? "" : s.substring(colon + 1);
            try {
                if (kind.equals("off") && colon < 0) {
                    return off();
                }
                if (kind.equals("confidence")) {
                    return confidence(Double.parseDouble(value));
                }
                if (kind.equals("patience")) {
                    return patience(Integer.parseInt(value));
                }
            } catch (NumberFormatException e) {
                // fall through to the one-line message below
            }
            throw new IllegalArgumentException(
                    "unknown exit policy '" + text + "'; write off, confidence:TAU or patience:T");
        }

        @Override
        public String toString() {
            if (kind.equals("confidence")) {
                return "confidence:" + threshold;
            }
            return kind.equals("patience") ? "patience:" + patience : "off";
        }
    }

    /** Per row: the logits returned and the exit (= layers run) that produced them. */
    public static final class Result {
        public final float[][] logits;
        public final int[] depth;

        Result(float[][] logits, int[] depth) {
            this.logits = logits;
            this.depth = depth;
        }

        /** The label index of row {@code row} (first largest logit). */
        public int label(int row) {
            return Postprocess.argmax(logits[row]);
        }
    }

    /** A policy's memory between exits for one batch (the patience counters). */
    static final class State {
        private final Policy policy;
        private final int numExits;
        private final int[] last;
        private final int[] count;

        State(Policy policy, int rows, int numExits) {
            this.policy = policy;
            this.numExits = numExits;
            this.last = new int[rows];
            this.count = new int[rows];
            Arrays.fill(last, -1);
        }

        /** Which of {@code rows} (their exit-{@code k} logits in order) stop now. */
        boolean[] step(int k, float[][] logits, int[] rows) {
            boolean[] stop = new boolean[rows.length];
            for (int i = 0; i < rows.length; i++) {
                if (k >= numExits) {
                    stop[i] = true;
                } else if (policy.kind.equals("confidence")) {
                    float[] probs = Postprocess.softmax(logits[i]);
                    stop[i] = (double) probs[Postprocess.argmax(logits[i])] >= policy.threshold;
                } else if (policy.kind.equals("patience")) {
                    int r = rows[i];
                    int pred = Postprocess.argmax(logits[i]);
                    count[r] = pred == last[r] ? count[r] + 1 : 0;
                    last[r] = pred;
                    stop[i] = count[r] >= policy.patience;
                }
            }
            return stop;
        }
    }

    /** Runs a padded batch under {@code policy}. */
    public static <H> Result run(
            LayerStepper<H> stepper, int[][] inputIds, int[][] attentionMask, int[][] tokenTypeIds,
            Policy policy) {
        int rows = inputIds.length;
        int numExits = stepper.numExits();
        State state = new State(policy, rows, numExits);
        float[][] logits = new float[rows][];
        int[] depth = new int[rows];
        int[] active = new int[rows];
        for (int i = 0; i < rows; i++) {
            active[i] = i;
        }
        H hidden = stepper.embed(inputIds, attentionMask, tokenTypeIds);
        for (int k = 1; k <= numExits && active.length > 0; k++) {
            hidden = stepper.step(k, hidden);
            if (k < numExits && policy.kind.equals("off")) {
                continue;
            }
            float[][] head = stepper.exitLogits(k, hidden);
            boolean[] stop = state.step(k, head, active);
            int kept = 0;
            for (int i = 0; i < active.length; i++) {
                if (stop[i]) {
                    logits[active[i]] = head[i].clone();
                    depth[active[i]] = k;
                } else {
                    kept++;
                }
            }
            if (kept == active.length || kept == 0) {
                if (kept == 0) {
                    break;
                }
                continue;
            }
            int[] keep = new int[kept];
            int[] nextActive = new int[kept];
            for (int i = 0, j = 0; i < active.length; i++) {
                if (!stop[i]) {
                    keep[j] = i;
                    nextActive[j++] = active[i];
                }
            }
            hidden = stepper.keepRows(hidden, keep);
            active = nextActive;
        }
        return new Result(logits, depth);
    }
}
