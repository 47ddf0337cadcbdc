package dev.albertedge.demo

import android.content.Context
import dev.albertedge.core.AlbertTokenizer
import dev.albertedge.core.SentencePieceModel
import dev.albertedge.core.SpanDecoder
import org.json.JSONObject
import org.tensorflow.lite.DataType
import org.tensorflow.lite.Interpreter
import java.io.Closeable
import java.io.FileNotFoundException
import java.nio.ByteBuffer

/** What scripts/prepare_qa_assets.sh wrote beside the question-answering model. */
data class QaModelInfo(val artifact: String, val precision: String, val seqLens: List<Int>)

/** The question-answering assets: qa_model.tflite, qa_spiece.model, qa_model_info.json. */
object QaAssets {
    const val MODEL = "qa_model.tflite"
    const val SPIECE = "qa_spiece.model"
    const val INFO = "qa_model_info.json"

    fun info(context: Context): QaModelInfo {
        val json = JSONObject(readText(context, INFO))
        val seqLens = json.getJSONArray("seq_lens")
        return QaModelInfo(
            artifact = json.getString("artifact"),
            precision = json.getString("precision"),
            seqLens = List(seqLens.length()) { seqLens.getInt(it) },
        )
    }

    fun tokenizer(context: Context): AlbertTokenizer {
        val stream = try {
            context.assets.open(SPIECE)
        } catch (e: FileNotFoundException) {
            throw MissingAssetException(SPIECE)
        }
        return stream.use { AlbertTokenizer(SentencePieceModel.load(it, "assets/$SPIECE")) }
    }

    private fun readText(context: Context, name: String): String = try {
        context.assets.open(name).bufferedReader(Charsets.UTF_8).use { it.readText() }
    } catch (e: FileNotFoundException) {
        throw MissingAssetException(name)
    }
}

/**
 * An albert-edge question-answering `.tflite` (`convert --to tflite` of an
 * AlbertForQuestionAnswering checkpoint): one batch-1 signature per sequence length, int32
 * (or int64) `input_ids`/`attention_mask`/`token_type_ids` of shape [1, L] in, float32
 * `start_logits`/`end_logits` of shape [1, L] out. [answer] cuts the context into
 * [SpanDecoder] windows of the largest length, runs each in the smallest signature that
 * holds it (padding masked out) and decodes the best span over all windows, as
 * `albert_edge.tasks` does in Python. XNNPACK on [threads] threads; not thread-safe.
 */
class LiteRtQuestionAnswerer private constructor(
    private val interpreter: Interpreter,
    private val signatures: Map<Int, Signature>,
) : Closeable {

    private class Signature(val key: String, val inputs: Map<String, DataType>)

    /** Sequence lengths the model has a signature for, ascending. */
    val seqLens: IntArray = signatures.keys.sorted().toIntArray()

    /** The answer and how many windows the context took. */
    class Result(val answer: SpanDecoder.Answer, val windows: Int)

    fun answer(
        tokenizer: AlbertTokenizer,
        question: String,
        context: String,
        stride: Int = SpanDecoder.DEFAULT_STRIDE,
    ): Result {
        val words = SpanDecoder.splitWords(context)
        val windows = SpanDecoder.windows(tokenizer, question, words, seqLens.last(), stride)
        val starts = ArrayList<FloatArray>(windows.size)
        val ends = ArrayList<FloatArray>(windows.size)
        for (w in windows) {
            val (s, e) = logits(w)
            starts.add(s)
            ends.add(e)
        }
        return Result(SpanDecoder.best(words, windows, starts, ends), windows.size)
    }

    /** Start and end logits of one window (its own length; the padding is dropped). */
    fun logits(window: SpanDecoder.Window): Pair<FloatArray, FloatArray> {
        val n = window.length()
        val len = seqLens.firstOrNull { it >= n }
            ?: throw IllegalArgumentException("a window of $n tokens; the model's longest is ${seqLens.last()}")
        val sig = signatures.getValue(len)
        val ids = IntArray(len)
        val types = IntArray(len)
        val mask = IntArray(len)
        for (i in 0 until n) {
            ids[i] = window.inputIds[i]
            types[i] = window.tokenTypeIds[i]
            mask[i] = 1
        }
        val feeds = HashMap<String, Any>(4)
        for ((name, type) in sig.inputs) {
            val values = when (name) {
                "input_ids" -> ids
                "attention_mask" -> mask
                "token_type_ids" -> types
                else -> throw IllegalStateException("unexpected model input '$name'")
            }
            feeds[name] = when (type) {
                DataType.INT32 -> arrayOf(values)
                DataType.INT64 -> arrayOf(LongArray(values.size) { values[it].toLong() })
                else -> throw IllegalStateException("model input '$name' is $type, not int32/int64")
            }
        }
        val start = arrayOf(FloatArray(len))
        val end = arrayOf(FloatArray(len))
        interpreter.runSignature(feeds, mapOf("start_logits" to start, "end_logits" to end), sig.key)
        return start[0].copyOf(n) to end[0].copyOf(n)
    }

    override fun close() = interpreter.close()

    companion object {
        fun open(model: ByteBuffer, threads: Int = 4): LiteRtQuestionAnswerer {
            val interpreter = Interpreter(model, Interpreter.Options().setNumThreads(threads).setUseXNNPACK(true))
            return try {
                LiteRtQuestionAnswerer(interpreter, readSignatures(interpreter))
            } catch (e: Exception) {
                interpreter.close()
                throw e
            }
        }

        private fun readSignatures(interpreter: Interpreter): Map<Int, Signature> {
            val found = HashMap<Int, Signature>()
            for (key in interpreter.signatureKeys) {
                val outputs = interpreter.getSignatureOutputs(key).toSet()
                if (!outputs.containsAll(listOf("start_logits", "end_logits"))) {
                    throw IllegalArgumentException(
                        "signature '$key' has outputs ${outputs.sorted()}, not start_logits/end_logits: " +
                            "convert an AlbertForQuestionAnswering checkpoint (scripts/prepare_qa_assets.sh)",
                    )
                }
                val shape = interpreter.getInputTensorFromSignature("input_ids", key).shape()
                if (shape.size != 2 || shape[0] != 1) {
                    throw IllegalArgumentException("signature '$key' takes input_ids of shape ${shape.contentToString()}, not [1, L]")
                }
                val inputs = interpreter.getSignatureInputs(key).filter { it in INPUTS }.associateWith {
                    interpreter.getInputTensorFromSignature(it, key).dataType()
                }
                found[shape[1]] = Signature(key, inputs)
            }
            if (found.isEmpty()) throw IllegalArgumentException("the model has no signatures to run")
            return found
        }

        private val INPUTS = setOf("input_ids", "attention_mask", "token_type_ids")
    }
}
