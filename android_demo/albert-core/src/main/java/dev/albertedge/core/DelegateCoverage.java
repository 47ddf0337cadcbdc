package dev.albertedge.core;

/**
 * Did the accelerator really run the model, and how much of it? Decided from op counts so
 * a fallback is shown, never hidden: the classic {@code GpuDelegate} restores the CPU plan
 * when it refuses a graph without telling anyone, and a partial delegation splits the
 * graph into CPU and GPU partitions that cost a copy each way.
 *
 * <p>Inputs: the model's op count and the ops albert-edge's rule table puts on the GPU
 * ({@code inspect} → {@code model_info.json}), whether the delegate was created and the
 * model ran, and — where LiteRT 2.x's {@code CompiledModel} reports it —
 * {@code isFullyAccelerated()} (null with the classic API).
 */
public final class DelegateCoverage {
    public enum Status { FULL, PARTIAL, FELL_BACK, DISAGREES }

    public final Status status;
    public final int totalOps;
    public final int delegatedOps;
    public final int cpuPartitions;
    public final String message;

    private DelegateCoverage(Status status, int totalOps, int delegatedOps, int cpuPartitions,
            String message) {
        this.status = status;
        this.totalOps = totalOps;
        this.delegatedOps = delegatedOps;
        this.cpuPartitions = cpuPartitions;
        this.message = message;
    }

    public static DelegateCoverage decide(String accelerator, boolean delegateRan, int totalOps,
            int predictedDelegatedOps, int predictedCpuPartitions, Boolean fullyAccelerated) {
        if (totalOps <= 0 || predictedDelegatedOps < 0 || predictedDelegatedOps > totalOps) {
            throw new IllegalArgumentException("op counts out of range: " + predictedDelegatedOps
                    + " of " + totalOps);
        }
        if (!delegateRan || predictedDelegatedOps == 0) {
            String why = delegateRan ? "no op of this model runs on it" : "it refused the model";
            return new DelegateCoverage(Status.FELL_BACK, totalOps, 0, 1,
                    accelerator + " fell back to the CPU: " + why);
        }
        boolean predictedFull = predictedDelegatedOps == totalOps;
        if (fullyAccelerated != null && fullyAccelerated != predictedFull) {
            return new DelegateCoverage(Status.DISAGREES, totalOps, predictedDelegatedOps,
                    predictedCpuPartitions,
                    accelerator + ": LiteRT says fully accelerated = " + fullyAccelerated
                            + ", albert-edge's rule table predicted " + predictedDelegatedOps + "/"
                            + totalOps + " ops; report it");
        }
        if (predictedFull) {
            return new DelegateCoverage(Status.FULL, totalOps, totalOps, 0,
                    accelerator + ": all " + totalOps + " ops");
        }
        return new DelegateCoverage(Status.PARTIAL, totalOps, predictedDelegatedOps,
                predictedCpuPartitions,
                accelerator + ": " + predictedDelegatedOps + "/" + totalOps + " ops, "
                        + predictedCpuPartitions + " CPU partition"
                        + (predictedCpuPartitions == 1 ? "" : "s"));
    }
}
