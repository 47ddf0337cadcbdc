package dev.albertedge.demo

import android.content.Intent
import android.os.Build
import android.os.Bundle
import android.view.View
import android.view.inputmethod.EditorInfo
import android.widget.AdapterView
import android.widget.ArrayAdapter
import android.widget.Button
import android.widget.EditText
import android.widget.Spinner
import android.widget.TextView
import androidx.appcompat.app.AppCompatActivity
import androidx.lifecycle.lifecycleScope
import dev.albertedge.core.AlbertTokenizer
import dev.albertedge.core.DelegateCoverage
import dev.albertedge.core.Postprocess
import kotlinx.coroutines.asCoroutineDispatcher
import kotlinx.coroutines.launch
import kotlinx.coroutines.withContext
import java.nio.ByteBuffer
import java.util.Locale
import java.util.concurrent.Executors

/**
 * Type a sentence, see positive/negative with its confidence and how long tokenization
 * and inference took; pick the delegate (unsupported ones fall back to XNNPACK with a
 * visible message). The smallest sequence bucket that holds the sentence is used.
 *
 * All model work happens on one background thread ([worker]): the LiteRT interpreter is
 * not thread-safe and the GPU delegate must stay on the thread that created it.
 */
class MainActivity : AppCompatActivity() {
    private val worker = Executors.newSingleThreadExecutor().asCoroutineDispatcher()

    // Owned by the worker thread.
    private var model: ByteBuffer? = null
    private var tokenizer: AlbertTokenizer? = null
    private var info: ModelInfo? = null
    private var classifier: LiteRtClassifier? = null

    private lateinit var input: EditText
    private lateinit var delegatePicker: Spinner
    private lateinit var delegateStatus: TextView
    private lateinit var classifyButton: Button
    private lateinit var resultView: TextView
    private lateinit var latencyView: TextView
    private lateinit var modelView: TextView

    private class Outcome(
        val prediction: Postprocess.Prediction,
        val tokenizeMs: Double,
        val inferenceMs: Double,
        val seqLen: Int,
        val tokens: Int,
        val truncated: Boolean,
    )

    override fun onCreate(savedInstanceState: Bundle?) {
        super.onCreate(savedInstanceState)
        setContentView(R.layout.activity_main)
        input = findViewById(R.id.input)
        delegatePicker = findViewById(R.id.delegate)
        delegateStatus = findViewById(R.id.delegate_status)
        classifyButton = findViewById(R.id.classify)
        resultView = findViewById(R.id.result)
        latencyView = findViewById(R.id.latency)
        modelView = findViewById(R.id.model_info)

        delegatePicker.adapter = ArrayAdapter(
            this,
            android.R.layout.simple_spinner_dropdown_item,
            DelegateChoice.entries.map { it.labelFor(Build.VERSION.SDK_INT) },
        )
        delegatePicker.setSelection(DelegateChoice.XNNPACK.ordinal)
        delegatePicker.onItemSelectedListener = object : AdapterView.OnItemSelectedListener {
            override fun onItemSelected(parent: AdapterView<*>?, view: View?, position: Int, id: Long) {
                switchDelegate(DelegateChoice.entries[position])
            }

            override fun onNothingSelected(parent: AdapterView<*>?) = Unit
        }
        classifyButton.setOnClickListener { classify() }
        input.setOnEditorActionListener { _, actionId, _ ->
            (actionId == EditorInfo.IME_ACTION_DONE).also { if (it) classify() }
        }
        findViewById<Button>(R.id.open_benchmark).setOnClickListener {
            startActivity(Intent(this, BenchmarkActivity::class.java))
        }
        findViewById<Button>(R.id.open_qa).setOnClickListener {
            startActivity(Intent(this, QuestionAnswerActivity::class.java))
        }
    }

    private fun switchDelegate(choice: DelegateChoice) {
        classifyButton.isEnabled = false
        delegateStatus.visibility = View.GONE
        modelView.text = getString(R.string.loading, choice.label)
        lifecycleScope.launch {
            val result = withContext(worker) {
                runCatching {
                    loadAssetsOnce()
                    classifier?.close()
                    classifier = null
                    val i = checkNotNull(info)
                    // The GPU gets the fp16 GPU-clean artifact (model_gpu.tflite) when present.
                    val gpuModel = i.gpuModel?.takeIf { choice.kind == DelegateChoice.Kind.GPU }
                    val bytes = gpuModel?.let { ModelAssets.mapModel(this@MainActivity, it.file) } ?: checkNotNull(model)
                    val (opened, fell) = LiteRtClassifier.openWithFallback(bytes, choice)
                    classifier = opened
                    // Show how much the delegate really runs (or that it fell back), never hide it.
                    val fallback = if (gpuModel != null) {
                        val c = DelegateCoverage.decide(
                            "GPU", fell == null, gpuModel.ops, gpuModel.gpuOps, gpuModel.cpuPartitions, null,
                        )
                        listOfNotNull(fell, c.message).joinToString(" ")
                    } else {
                        fell
                    }
                    val summary = getString(
                        R.string.model_summary,
                        i.artifact,
                        i.precision,
                        opened.seqLens.joinToString(", "),
                        opened.choice.label,
                    )
                    summary to fallback
                }
            }
            result.onSuccess { (summary, fallback) ->
                modelView.text = summary
                if (fallback != null) {
                    delegateStatus.text = fallback
                    delegateStatus.visibility = View.VISIBLE
                }
                classifyButton.isEnabled = true
            }.onFailure { e ->
                modelView.text = getString(R.string.error, e.message ?: e.toString())
            }
        }
    }

    /** Reads the tokenizer, model info and model mapping the first time (on the worker). */
    private fun loadAssetsOnce() {
        if (model == null) {
            info = ModelAssets.info(this)
            tokenizer = ModelAssets.tokenizer(this)
            model = ModelAssets.mapModel(this)
        }
    }

    private fun classify() {
        val text = input.text.toString()
        classifyButton.isEnabled = false
        lifecycleScope.launch {
            val result = withContext(worker) {
                runCatching {
                    val c = checkNotNull(classifier) { "the model is not loaded" }
                    val tok = checkNotNull(tokenizer)
                    val t0 = System.nanoTime()
                    val encoding = tok.encodeForBuckets(text, c.seqLens)
                    val t1 = System.nanoTime()
                    val logits = c.logits(encoding)
                    val t2 = System.nanoTime()
                    val prediction = Postprocess.classify(logits, checkNotNull(info).labels.toTypedArray())
                    Outcome(
                        prediction,
                        (t1 - t0) / 1e6,
                        (t2 - t1) / 1e6,
                        encoding.width(),
                        encoding.length(),
                        encoding.truncated(),
                    )
                }
            }
            classifyButton.isEnabled = true
            result.onSuccess { o ->
                resultView.text = getString(
                    R.string.result,
                    o.prediction.label,
                    String.format(Locale.ROOT, "%.1f", 100.0 * o.prediction.probability),
                )
                latencyView.text = getString(
                    R.string.latency,
                    String.format(Locale.ROOT, "%.2f", o.tokenizeMs),
                    String.format(Locale.ROOT, "%.2f", o.inferenceMs),
                    o.seqLen,
                    o.tokens,
                ) + if (o.truncated) getString(R.string.truncated) else ""
            }.onFailure { e ->
                resultView.text = getString(R.string.error, e.message ?: e.toString())
                latencyView.text = ""
            }
        }
    }

    override fun onDestroy() {
        super.onDestroy()
        // Close on the worker (the GPU delegate's thread), then stop the worker.
        worker.executor.execute {
            classifier?.close()
            classifier = null
        }
        worker.close()
    }
}
