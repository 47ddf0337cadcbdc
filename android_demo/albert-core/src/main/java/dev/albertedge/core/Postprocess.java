package dev.albertedge.core;

/**
 * Logits of a sequence-classification head → label and probability.
 *
 * <p>The contract ({@code tests/test_android_java.py} checks it against a Python reference,
 * bit for bit): the label is the first index of the largest logit (numpy's argmax), so it
 * never depends on floating-point library details; probabilities are a max-subtracted
 * softmax computed in double precision, summed left to right, then rounded to float32.
 * Why float32: {@code exp} differs by up to one ulp in double between libms (glibc,
 * Android's bionic, HotSpot's intrinsic, fdlibm), and the logits themselves are only
 * float32, so float32 is the precision the numbers carry and the one at which Java and
 * Python agree exactly.
 */
public final class Postprocess {
    private Postprocess() {}

    /** The winning label with its probability, and every class's probability. */
    public static final class Prediction {
        public final int labelIndex;
        public final String label;
        public final float probability;
        private final float[] probabilities;

        Prediction(int labelIndex, String label, float probability, float[] probabilities) {
            this.labelIndex = labelIndex;
            this.label = label;
            this.probability = probability;
            this.probabilities = probabilities;
        }

        public float[] probabilities() {
            return probabilities.clone();
        }

        @Override
        public String toString() {
            return label + " (" + labelIndex + ") p=" + probability;
        }
    }

    /** Index of the first largest logit; throws on empty or non-finite logits. */
    public static int argmax(float[] logits) {
        check(logits);
        int best = 0;
        for (int i = 1; i < logits.length; i++) {
            if (logits[i] > logits[best]) {
                best = i;
            }
        }
        return best;
    }

    /** Softmax probabilities, rounded to float32 as described in the class comment. */
    public static float[] softmax(float[] logits) {
        check(logits);
        double max = logits[argmax(logits)];
        double[] exps = new double[logits.length];
        double total = 0.0;
        for (int i = 0; i < logits.length; i++) {
            exps[i] = Math.exp((double) logits[i] - max);
            total += exps[i];
        }
        float[] out = new float[logits.length];
        for (int i = 0; i < logits.length; i++) {
            out[i] = (float) (exps[i] / total);
        }
        return out;
    }

    /** Classifies one example; {@code labels[i]} names class {@code i} (config's id2label). */
    public static Prediction classify(float[] logits, String[] labels) {
        check(logits);
        if (labels.length != logits.length) {
            throw new IllegalArgumentException(
                    "model gives " + logits.length + " logits but there are " + labels.length
                            + " labels; labels.txt must list one label per class, in id order");
        }
        int best = argmax(logits);
        float[] probs = softmax(logits);
        return new Prediction(best, labels[best], probs[best], probs);
    }

    private static void check(float[] logits) {
        if (logits.length == 0) {
            throw new IllegalArgumentException("no logits: the model output is empty");
        }
        for (int i = 0; i < logits.length; i++) {
            if (Float.isNaN(logits[i]) || Float.isInfinite(logits[i])) {
                throw new IllegalArgumentException(
                        "logit " + i + " is " + logits[i]
                                + "; the model produced a non-finite output");
            }
        }
    }
}
