package dev.albertedge.demo

/**
 * What runs the model: LiteRT's builtin CPU kernels at 1/2/4 threads, the XNNPACK CPU
 * delegate, the GPU delegate, or NNAPI. [backend] and [device] are the names written in
 * benchmark results (the `android-app-` prefix tells these rows, measured by this app's
 * Interpreter on real sentences, from `albert-edge bench --adb`'s `benchmark_model` rows).
 */
enum class DelegateChoice(
    val label: String,
    val kind: Kind,
    val threads: Int,
    val backend: String,
    val device: String,
) {
    CPU_1("CPU · 1 thread", Kind.CPU, 1, "android-app-cpu", "android-cpu"),
    CPU_2("CPU · 2 threads", Kind.CPU, 2, "android-app-cpu", "android-cpu"),
    CPU_4("CPU · 4 threads", Kind.CPU, 4, "android-app-cpu", "android-cpu"),
    XNNPACK("XNNPACK · 4 threads", Kind.XNNPACK, 4, "android-app-xnnpack", "android-cpu"),
    GPU("GPU delegate", Kind.GPU, 1, "android-app-gpu", "android-gpu"),
    NNAPI("NNAPI", Kind.NNAPI, 1, "android-app-nnapi", "android-nnapi"),
    ;

    enum class Kind { CPU, XNNPACK, GPU, NNAPI }

    /** The label on this device: NNAPI says when it is deprecated (API 35+) or may use its CPU path. */
    fun labelFor(sdkInt: Int): String =
        if (kind == Kind.NNAPI) dev.albertedge.core.AcceleratorPolicy.nnapi(sdkInt).label else label

    companion object {
        /** Where an unsupported delegate falls back to: always available on any device. */
        val FALLBACK = XNNPACK

        /** Parses `"CPU_1,GPU"` (an intent extra); null or blank means all of them. */
        fun parseList(text: String?): List<DelegateChoice> {
            if (text.isNullOrBlank()) return entries
            return text.split(',').map { it.trim() }.filter { it.isNotEmpty() }.map { name ->
                entries.firstOrNull { it.name.equals(name, ignoreCase = true) }
                    ?: throw IllegalArgumentException(
                        "unknown delegate '$name'; choose from ${entries.joinToString { it.name }}",
                    )
            }
        }
    }
}
