package dev.albertedge.core;

/**
 * Memory one model costs: proportional set size (PSS) after loading it minus before.
 *
 * <p>Why not VmHWM ({@link MemoryProbe}): it is the process's all-time peak, so a second
 * model loaded after a bigger one reports the bigger one's figure. PSS before/after load
 * (Android: {@code Debug.getMemoryInfo(info); info.getTotalPss()}, in KiB) charges the
 * model's mmapped weights and the runtime's arena to that model. Shared pages count
 * proportionally, which is what PSS is for.
 */
public final class PssDelta {
    private PssDelta() {}

    /** Bytes the load added, or null when either sample is missing (0 = not measured). */
    public static Long bytes(long pssBeforeKb, long pssAfterKb) {
        if (pssBeforeKb <= 0 || pssAfterKb <= 0) {
            return null;
        }
        return Math.max(0L, pssAfterKb - pssBeforeKb) * 1024L;
    }
}
