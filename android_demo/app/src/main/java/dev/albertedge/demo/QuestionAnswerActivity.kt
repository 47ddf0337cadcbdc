package dev.albertedge.demo

import android.graphics.Color
import android.os.Bundle
import android.text.SpannableString
import android.text.Spanned
import android.text.style.BackgroundColorSpan
import android.widget.Button
import android.widget.EditText
import android.widget.TextView
import androidx.appcompat.app.AppCompatActivity
import androidx.lifecycle.lifecycleScope
import dev.albertedge.core.AlbertTokenizer
import kotlinx.coroutines.asCoroutineDispatcher
import kotlinx.coroutines.launch
import kotlinx.coroutines.withContext
import java.util.Locale
import java.util.concurrent.Executors

/**
 * Question answering beside the sentiment screen: paste a paragraph, ask a question, see
 * the answer span highlighted in the paragraph with its score, how many windows the
 * paragraph took and how long tokenization and inference took. The span comes from
 * albert-core's [dev.albertedge.core.SpanDecoder] (n-best 20, answers of at most 30
 * tokens, the best over all windows), the decoding albert_edge.tasks scores SQuAD with.
 *
 * All model work happens on one background thread ([worker]): the interpreter is not
 * thread-safe.
 */
class QuestionAnswerActivity : AppCompatActivity() {
    private val worker = Executors.newSingleThreadExecutor().asCoroutineDispatcher()

    // Owned by the worker thread.
    private var answerer: LiteRtQuestionAnswerer? = null
    private var tokenizer: AlbertTokenizer? = null

    private lateinit var contextInput: EditText
    private lateinit var questionInput: EditText
    private lateinit var answerButton: Button
    private lateinit var answerView: TextView
    private lateinit var contextView: TextView
    private lateinit var latencyView: TextView
    private lateinit var modelView: TextView

    override fun onCreate(savedInstanceState: Bundle?) {
        super.onCreate(savedInstanceState)
        setContentView(R.layout.activity_question_answer)
        contextInput = findViewById(R.id.qa_context)
        questionInput = findViewById(R.id.qa_question)
        answerButton = findViewById(R.id.qa_answer_button)
        answerView = findViewById(R.id.qa_answer)
        contextView = findViewById(R.id.qa_context_marked)
        latencyView = findViewById(R.id.qa_latency)
        modelView = findViewById(R.id.qa_model_info)
        answerButton.setOnClickListener { answer() }
        load()
    }

    private fun load() {
        answerButton.isEnabled = false
        modelView.text = getString(R.string.qa_loading)
        lifecycleScope.launch {
            val result = withContext(worker) {
                runCatching {
                    val info = QaAssets.info(this@QuestionAnswerActivity)
                    tokenizer = QaAssets.tokenizer(this@QuestionAnswerActivity)
                    val model = ModelAssets.mapModel(this@QuestionAnswerActivity, QaAssets.MODEL)
                    val opened = LiteRtQuestionAnswerer.open(model)
                    answerer = opened
                    getString(R.string.qa_model_summary, info.artifact, info.precision, opened.seqLens.joinToString(", "))
                }
            }
            result.onSuccess {
                modelView.text = it
                answerButton.isEnabled = true
            }.onFailure { e ->
                modelView.text = getString(R.string.error, e.message ?: e.toString())
            }
        }
    }

    private fun answer() {
        val question = questionInput.text.toString()
        val paragraph = contextInput.text.toString()
        answerButton.isEnabled = false
        lifecycleScope.launch {
            val result = withContext(worker) {
                runCatching {
                    val qa = checkNotNull(answerer) { "the model is not loaded" }
                    val t0 = System.nanoTime()
                    val r = qa.answer(checkNotNull(tokenizer), question, paragraph)
                    val ms = (System.nanoTime() - t0) / 1e6
                    r to ms
                }
            }
            answerButton.isEnabled = true
            result.onSuccess { (r, ms) ->
                val a = r.answer
                if (a.found()) {
                    answerView.text = getString(R.string.qa_result, a.text, String.format(Locale.ROOT, "%.2f", a.score))
                    val marked = SpannableString(paragraph)
                    marked.setSpan(BackgroundColorSpan(HIGHLIGHT), a.charStart, a.charEnd, Spanned.SPAN_EXCLUSIVE_EXCLUSIVE)
                    contextView.text = marked
                } else {
                    answerView.text = getString(R.string.qa_no_answer)
                    contextView.text = paragraph
                }
                latencyView.text = getString(R.string.qa_latency, String.format(Locale.ROOT, "%.1f", ms), r.windows)
            }.onFailure { e ->
                answerView.text = getString(R.string.error, e.message ?: e.toString())
                latencyView.text = ""
            }
        }
    }

    override fun onDestroy() {
        super.onDestroy()
        worker.executor.execute {
            answerer?.close()
            answerer = null
        }
        worker.close()
    }

    private companion object {
        val HIGHLIGHT = Color.argb(96, 255, 193, 7)
    }
}
