package dev.albertedge.core;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import org.junit.Test;

public class PostprocessTest {
    private static final String[] LABELS = {"negative", "positive"};

    @Test
    public void picksTheLargestLogitWithItsSoftmaxProbability() {
        Postprocess.Prediction p = Postprocess.classify(new float[] {-1.5f, 2.0f}, LABELS);
        assertEquals(1, p.labelIndex);
        assertEquals("positive", p.label);
        assertEquals((float) (1.0 / (1.0 + Math.exp(-3.5))), p.probability, 0f);
        float[] probs = p.probabilities();
        assertEquals(1.0, probs[0] + probs[1], 1e-7);
    }

    @Test
    public void tiesGoToTheFirstIndex() {
        Postprocess.Prediction p = Postprocess.classify(new float[] {0.25f, 0.25f}, LABELS);
        assertEquals(0, p.labelIndex);
        assertEquals(0.5f, p.probability, 0f);
        assertEquals(1, Postprocess.argmax(new float[] {1f, 3f, 3f}));
    }

    @Test
    public void extremeLogitsStayFinite() {
        float[] probs = Postprocess.softmax(new float[] {Float.MAX_VALUE, -Float.MAX_VALUE});
        assertArrayEquals(new float[] {1f, 0f}, probs, 0f);
        probs = Postprocess.softmax(new float[] {-1e30f, -1e30f});
        assertArrayEquals(new float[] {0.5f, 0.5f}, probs, 0f);
    }

    @Test
    public void rejectsNonFiniteEmptyOrMislabelledOutputs() {
        float[][] bad = {{Float.NaN, 0f}, {Float.POSITIVE_INFINITY, 0f}, {}};
        for (float[] logits : bad) {
            try {
                Postprocess.classify(logits, new String[logits.length]);
                fail("accepted " + java.util.Arrays.toString(logits));
            } catch (IllegalArgumentException e) {
                assertTrue(e.getMessage(), e.getMessage().contains("logit"));
            }
        }
        try {
            Postprocess.classify(new float[] {1f, 2f, 3f}, LABELS);
            fail("accepted 3 logits for 2 labels");
        } catch (IllegalArgumentException e) {
            assertTrue(e.getMessage(), e.getMessage().contains("labels.txt"));
        }
    }
}
