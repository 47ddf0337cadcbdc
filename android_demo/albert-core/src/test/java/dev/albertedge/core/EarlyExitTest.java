package dev.albertedge.core;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.fail;

import org.junit.Test;

/** The policies on the hand-written cases of tests/early_exit/test_policy.py. */
public class EarlyExitTest {
    private static float[][][] table(float[][]... rows) {
        float[][][] out = new float[rows.length][][];
        for (int i = 0; i < rows.length; i++) {
            out[i] = rows[i];
        }
        return out;
    }

    private static float[][] row(float... pairs) {
        float[][] out = new float[pairs.length / 2][];
        for (int i = 0; i < out.length; i++) {
            out[i] = new float[] {pairs[2 * i], pairs[2 * i + 1]};
        }
        return out;
    }

    private static EarlyExit.Result run(float[][][] perExit, EarlyExit.Policy policy, ReplayStepper s) {
        int[][] ids = new int[perExit.length][];
        for (int i = 0; i < ids.length; i++) {
            ids[i] = new int[] {i};
        }
        return EarlyExit.run(s, ids, ids, ids, policy);
    }

    @Test
    public void offRunsEveryLayerAndReturnsTheLastExit() {
        float[][][] t = table(row(9, -9, 8, -8, 0, 1));
        ReplayStepper s = new ReplayStepper(t);
        EarlyExit.Result r = run(t, EarlyExit.Policy.off(), s);
        assertArrayEquals(new int[] {3}, r.depth);
        assertArrayEquals(new float[] {0, 1}, r.logits[0], 0f);
        assertArrayEquals(new int[] {3}, s.layersRun);
    }

    @Test
    public void confidenceExitsAtTheFirstConfidentHead() {
        float[][][] t = table(row(0, 0, 4, 0, 0, 9), row(0, 0, 0.1f, 0, 0.2f, 0));
        ReplayStepper s = new ReplayStepper(t);
        EarlyExit.Result r = run(t, EarlyExit.Policy.confidence(0.9), s);
        assertArrayEquals(new int[] {2, 3}, r.depth);
        assertArrayEquals(new float[] {4, 0}, r.logits[0], 0f);
        assertArrayEquals(r.depth, s.layersRun); // a row that left is not stepped again
    }

    @Test
    public void patienceCountsUnchangedPredictions() {
        float[][][] t = table(
                row(1, 0, 1, 0, 0, 1, 0, 1, 0, 1),
                row(1, 0, 0, 1, 1, 0, 0, 1, 1, 0),
                row(0, 1, 0, 1, 0, 1, 1, 0, 1, 0));
        EarlyExit.Result r = run(t, EarlyExit.Policy.patience(1), new ReplayStepper(t));
        assertArrayEquals(new int[] {2, 5, 2}, r.depth);
        r = run(t, EarlyExit.Policy.patience(2), new ReplayStepper(t));
        assertArrayEquals(new int[] {5, 5, 3}, r.depth);
        assertEquals(1, r.label(2));
    }

    @Test
    public void policiesParseAndRefuse() {
        assertEquals("off", EarlyExit.Policy.parse("off").toString());
        assertEquals("confidence:0.95", EarlyExit.Policy.parse("confidence:0.95").toString());
        assertEquals("patience:2", EarlyExit.Policy.parse("patience:2").toString());
        for (String bad : new String[] {"confidence:1.5", "confidence:x", "patience:0", "patience:1.5", "fast", "off:1"}) {
            try {
                EarlyExit.Policy.parse(bad);
                fail("accepted " + bad);
            } catch (IllegalArgumentException e) {
                // expected
            }
        }
    }
}
