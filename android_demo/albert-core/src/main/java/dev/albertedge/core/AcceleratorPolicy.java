package dev.albertedge.core;

/**
 * Which accelerators an Android device may offer, decided from its API level alone, so
 * the rule is testable on a plain JVM (the app passes {@code Build.VERSION.SDK_INT}).
 *
 * <p>NNAPI: the delegate exists from Android 8.1 (API 27); {@code setUseNnapiCpu(false)}
 * — refusing NNAPI's slow CPU reference path — only takes effect from Android 10 (API 29),
 * so below 29 NNAPI may silently run on its CPU implementation and the app must say so;
 * NNAPI is deprecated from Android 15 (API 35) in favour of LiteRT's GPU/NPU accelerators.
 */
public final class AcceleratorPolicy {
    public static final int NNAPI_MIN_API = 27;
    public static final int NNAPI_CPU_FLAG_MIN_API = 29;
    public static final int NNAPI_DEPRECATED_API = 35;

    private AcceleratorPolicy() {}

    /** What NNAPI means on a device running {@code sdkInt}. */
    public static final class Nnapi {
        public final boolean available;
        /** {@code setUseNnapiCpu(false)} is honoured (API >= 29). */
        public final boolean canRefuseNnapiCpu;
        public final boolean deprecated;
        /** Why it is unavailable, or null. */
        public final String unavailableReason;
        /** The label the app shows for the NNAPI choice. */
        public final String label;

        Nnapi(boolean available, boolean canRefuseNnapiCpu, boolean deprecated, String reason,
                String label) {
            this.available = available;
            this.canRefuseNnapiCpu = canRefuseNnapiCpu;
            this.deprecated = deprecated;
            this.unavailableReason = reason;
            this.label = label;
        }
    }

    public static Nnapi nnapi(int sdkInt) {
        if (sdkInt < NNAPI_MIN_API) {
            return new Nnapi(false, false, false,
                    "NNAPI needs Android 8.1 (API " + NNAPI_MIN_API + "); this device runs API "
                            + sdkInt, "NNAPI (unavailable)");
        }
        boolean refuseCpu = sdkInt >= NNAPI_CPU_FLAG_MIN_API;
        boolean deprecated = sdkInt >= NNAPI_DEPRECATED_API;
        String label = "NNAPI";
        if (deprecated) {
            label += " (deprecated from Android 15)";
        } else if (!refuseCpu) {
            label += " (may run on NNAPI's CPU path below Android 10)";
        }
        return new Nnapi(true, refuseCpu, deprecated, null, label);
    }

    /**
     * The model file for an accelerator: the GPU gets the fp16 GPU-clean artifact
     * ({@code albert-edge convert --target gpu}) when the APK has one; CPU and NPU paths
     * get the int8 artifact (int8 is the CPU/NPU format; LiteRT's GPU cannot build it).
     */
    public static String modelFor(String accelerator, boolean hasGpuModel) {
        if ("gpu".equals(accelerator) && hasGpuModel) {
            return "model_gpu.tflite";
        }
        return "model.tflite";
    }
}
