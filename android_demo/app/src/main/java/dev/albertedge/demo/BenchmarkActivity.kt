package dev.albertedge.demo

import android.app.ActivityManager
import android.os.Build
import android.os.Bundle
import android.os.Debug
import android.util.Log
import android.widget.TextView
import androidx.appcompat.app.AppCompatActivity
import androidx.lifecycle.lifecycleScope
import dev.albertedge.core.BenchmarkReport
import dev.albertedge.core.BenchmarkResult
import dev.albertedge.core.BenchmarkRunner
import dev.albertedge.core.DelegateCoverage
import dev.albertedge.core.PssDelta
import dev.albertedge.core.Encoding
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.asCoroutineDispatcher
import kotlinx.coroutines.launch
import kotlinx.coroutines.withContext
import org.tensorflow.lite.TensorFlowLite
import java.io.File
import java.util.Locale
import java.util.concurrent.Executors

/**
 * Runs N inferences per delegate and sequence length on real SST-2 sentences and writes an
 * `albert-edge-bench/1` report (the harness's schema) to
 * `/sdcard/Android/data/dev.albertedge.demo/files/albert-edge-bench.json`.
 *
 * Intent extras (all optional): `runs` (default 50), `warmup` (5), `delegates`
 * (comma-separated [DelegateChoice] names, default all), `seq_lens` (comma-separated,
 * default every signature). From a computer:
 * `adb shell am start -n dev.albertedge.demo/.BenchmarkActivity --ei runs 100`; the log line
 * `ALBERT_EDGE_BENCH_DONE <path>` (tag AlbertEdgeBench) says when the file is complete.
 */
class BenchmarkActivity : AppCompatActivity() {
    private val worker = Executors.newSingleThreadExecutor().asCoroutineDispatcher()
    private lateinit var log: TextView

    override fun onCreate(savedInstanceState: Bundle?) {
        super.onCreate(savedInstanceState)
        setContentView(R.layout.activity_benchmark)
        log = findViewById(R.id.bench_log)
        val runs = intent.getIntExtra("runs", 50)
        val warmup = intent.getIntExtra("warmup", 5)
        val delegates = try {
            DelegateChoice.parseList(intent.getStringExtra("delegates"))
        } catch (e: IllegalArgumentException) {
            say(e.message ?: "bad delegates extra")
            return
        }
        val seqLensExtra = intent.getStringExtra("seq_lens")
        lifecycleScope.launch {
            val outcome = withContext(worker) {
                runCatching { runBenchmark(runs, warmup, delegates, seqLensExtra) }
            }
            outcome.onSuccess { file ->
                say(getString(R.string.bench_written, file.path))
                Log.i(TAG, "ALBERT_EDGE_BENCH_DONE ${file.path}")
            }.onFailure { e ->
                say(getString(R.string.error, e.message ?: e.toString()))
                Log.e(TAG, "ALBERT_EDGE_BENCH_FAILED ${e.message}", e)
            }
        }
    }

    private suspend fun runBenchmark(runs: Int, warmup: Int, delegates: List<DelegateChoice>, seqLensExtra: String?): File {
        require(runs >= 1 && warmup >= 0) { "runs must be >= 1 and warmup >= 0" }
        val info = ModelAssets.info(this)
        val tokenizer = ModelAssets.tokenizer(this)
        val model = ModelAssets.mapModel(this)
        val sentences = ModelAssets.benchSentences(this)
        require(sentences.isNotEmpty()) { "assets/${ModelAssets.SENTENCES} has no sentences" }
        val seqLens = seqLensExtra?.split(',')?.map { it.trim().toInt() } ?: info.seqLens
        sayLater("${sentences.size} sentences, runs=$runs, warmup=$warmup, seq_lens=$seqLens")

        val report = BenchmarkReport().machine(
            if (Build.VERSION.SDK_INT >= Build.VERSION_CODES.S) Build.SOC_MODEL else Build.HARDWARE,
            "Android ${Build.VERSION.RELEASE} (SDK ${Build.VERSION.SDK_INT})",
            mapOf(
                "litert" to TensorFlowLite.runtimeVersion(),
                "albert-edge-demo" to (packageManager.getPackageInfo(packageName, 0).versionName ?: "?"),
            ),
        )
        report.machine()["device"] = "${Build.MANUFACTURER} ${Build.MODEL}"
        report.machine()["arch"] = Build.SUPPORTED_ABIS.firstOrNull()
        report.machine()["logical_cores"] = Runtime.getRuntime().availableProcessors()
        report.machine()["ram_bytes"] = ActivityManager.MemoryInfo().also {
            (getSystemService(ACTIVITY_SERVICE) as ActivityManager).getMemoryInfo(it)
        }.totalMem
        report.machine()["gpu"] = null
        report.settings()["runs"] = runs
        report.settings()["warmup"] = warmup
        report.settings()["seq_lens"] = seqLens
        report.settings()["tool"] = "android_demo BenchmarkActivity (LiteRT Interpreter, Java API)"
        report.settings()["inputs"] = "${sentences.size} SST-2 dev sentences from assets/${ModelAssets.SENTENCES}, " +
            "tokenized by the app's Java tokenizer, padded/truncated to each length"

        for (seqLen in seqLens) {
            // Tokenized once, outside the timed loop: these rows time the model alone.
            val inputs: List<Encoding> = sentences.map { tokenizer.encode(it, null, seqLen, true, true) }
            for (choice in delegates) {
                // The GPU row runs the fp16 GPU-clean artifact when the APK has one.
                val gpuModel = info.gpuModel?.takeIf { choice.kind == DelegateChoice.Kind.GPU }
                val rowModel = gpuModel?.let { ModelAssets.mapModel(this, it.file) } ?: model
                var pssDelta: Long? = null
                val template = BenchmarkResult().apply {
                    artifact = if (gpuModel != null) "${info.artifact}-gpu" else info.artifact
                    format = "tflite"
                    precision = if (gpuModel != null) "fp16" else info.precision
                    backend = choice.backend
                    device = choice.device
                    batch = 1
                    this.seqLen = seqLen
                    threads = choice.threads
                    fileBytes = info.fileBytes
                    floorBytes = info.floorBytes
                    extra["tool"] = "android_demo"
                    extra["delegate"] = choice.name
                }
                val result = BenchmarkRunner.measure(template, {
                    val pssBefore = pssKb()
                    val classifier = try {
                        LiteRtClassifier.open(rowModel, choice, verify = false).also {
                            // Per-model memory: PSS after load minus before (not VmHWM, a process-wide peak).
                            pssDelta = PssDelta.bytes(pssBefore, pssKb())
                        }
                    } catch (e: DelegateUnsupportedException) {
                        throw BenchmarkRunner.Unsupported("${choice.label}: ${e.message}")
                    }
                    if (seqLen !in classifier.seqLens) {
                        classifier.close()
                        throw BenchmarkRunner.Unsupported(
                            "no signature of length $seqLen (has ${classifier.seqLens.joinToString()})",
                        )
                    }
                    object : BenchmarkRunner.Session {
                        override fun run(index: Int) {
                            classifier.logits(inputs[index % inputs.size])
                        }

                        override fun close() = classifier.close()
                    }
                }, warmup, runs)
                result.extra["model_pss_bytes"] = pssDelta
                if (gpuModel != null) {
                    val c = DelegateCoverage.decide(
                        "GPU", result.status == BenchmarkResult.OK, gpuModel.ops, gpuModel.gpuOps,
                        gpuModel.cpuPartitions, null,
                    )
                    result.extra["delegate_coverage"] = c.status.name
                    result.extra["delegated_ops"] = c.delegatedOps
                    result.extra["ops"] = c.totalOps
                }
                report.add(result)
                sayLater(describe(result))
            }
        }
        val file = File(getExternalFilesDir(null) ?: filesDir, "albert-edge-bench.json")
        val tmp = File(file.path + ".tmp")
        tmp.writeText(report.toJson(), Charsets.UTF_8)
        check(tmp.renameTo(file)) { "could not write ${file.path}" }
        return file
    }

    private fun describe(r: BenchmarkResult): String {
        val head = "${r.backend} t${r.threads} seq ${r.seqLen}: "
        val lat = r.latency
        return if (r.status == BenchmarkResult.OK && lat != null) {
            head + String.format(Locale.ROOT, "p50 %.2f ms, p90 %.2f ms, load %.0f ms", lat.p50, lat.p90, r.loadMs)
        } else {
            head + "${r.status}: ${r.reason}"
        }
    }

    private suspend fun sayLater(line: String) = withContext(Dispatchers.Main) { say(line) }

    private fun say(line: String) {
        log.append("\n$line")
        Log.i(TAG, line)
    }

    override fun onDestroy() {
        super.onDestroy()
        worker.close()
    }

    companion object {
        private const val TAG = "AlbertEdgeBench"
    }

    /** This process's total PSS in KiB (Debug.MemoryInfo), sampled around each model load. */
    private fun pssKb(): Long = Debug.MemoryInfo().also { Debug.getMemoryInfo(it) }.totalPss.toLong()
}
