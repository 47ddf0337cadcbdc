package dev.albertedge.core;

/**
 * A {@link EarlyExit.LayerStepper} that replays per-exit logits a real runtime computed
 * (ONNX Runtime, written by the Python side), for the JVM where no model runtime runs.
 *
 * <p>Its state is the list of example numbers still in the batch: {@code embed} reads row
 * {@code i}'s example number from {@code inputIds[i][0]}. It records how many layers each
 * example was stepped through and refuses layers out of order, so a loop that steps a row
 * further than its exit, or skips a layer, is caught.
 */
final class ReplayStepper implements EarlyExit.LayerStepper<int[]> {
    private final float[][][] perExit; // [example][exit][label]
    final int[] layersRun;
    private int lastLayer;

    ReplayStepper(float[][][] perExit) {
        this.perExit = perExit;
        this.layersRun = new int[perExit.length];
    }

    @Override
    public int numExits() {
        return perExit[0].length;
    }

    @Override
    public int[] embed(int[][] inputIds, int[][] attentionMask, int[][] tokenTypeIds) {
        int[] rows = new int[inputIds.length];
        for (int i = 0; i < rows.length; i++) {
            rows[i] = inputIds[i][0];
        }
        lastLayer = 0;
        return rows;
    }

    @Override
    public int[] step(int layer, int[] state) {
        if (layer != lastLayer + 1) {
            throw new IllegalStateException("layer " + layer + " stepped after " + lastLayer);
        }
        lastLayer = layer;
        for (int r : state) {
            layersRun[r]++;
        }
        return state;
    }

    @Override
    public float[][] exitLogits(int exit, int[] state) {
        if (exit != lastLayer) {
            throw new IllegalStateException("exit " + exit + " read after layer " + lastLayer);
        }
        float[][] out = new float[state.length][];
        for (int i = 0; i < state.length; i++) {
            out[i] = perExit[state[i]][exit - 1].clone();
        }
        return out;
    }

    @Override
    public int[] keepRows(int[] state, int[] rows) {
        int[] out = new int[rows.length];
        for (int i = 0; i < rows.length; i++) {
            out[i] = state[rows[i]];
        }
        return out;
    }
}
