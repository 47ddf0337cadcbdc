package dev.albertedge.demo

import android.os.Build
import dev.albertedge.core.AcceleratorPolicy
import dev.albertedge.core.Encoding
import org.tensorflow.lite.DataType
import org.tensorflow.lite.Delegate
import org.tensorflow.lite.Interpreter
import org.tensorflow.lite.gpu.CompatibilityList
import org.tensorflow.lite.gpu.GpuDelegate
import org.tensorflow.lite.nnapi.NnApiDelegate
import java.io.Closeable
import java.nio.ByteBuffer

/** The chosen delegate cannot run here; the message says why, in one line. */
class DelegateUnsupportedException(message: String) : Exception(message)

/**
 * An albert-edge `.tflite` on one delegate: one batch-1 signature per sequence length
 * (`seq_32`, `seq_64`, ... with int32 — or int64 — `input_ids`/`attention_mask`/
 * `token_type_ids` of shape [1, L]), found by reading each signature's `input_ids` shape,
 * as the Python runner does. Not thread-safe: use it from one thread (the GPU delegate
 * requires the thread that created it anyway).
 */
class LiteRtClassifier private constructor(
    private val interpreter: Interpreter,
    private val delegate: Delegate?,
    val choice: DelegateChoice,
    private val signatures: Map<Int, SignatureIo>,
) : Closeable {

    private class SignatureIo(
        val key: String,
        val inputs: Map<String, DataType>,
        val outputName: String,
        val outputType: DataType,
        val numClasses: Int,
        val scale: Float,
        val zeroPoint: Int,
    )

    /** Sequence lengths the model has a signature for, ascending. */
    val seqLens: IntArray = signatures.keys.sorted().toIntArray()

    val numClasses: Int get() = signatures.getValue(seqLens[0]).numClasses

    /** Logits of one example; its padded width must be one of [seqLens]. */
    fun logits(encoding: Encoding): FloatArray {
        val sig = signatures[encoding.width()] ?: throw IllegalArgumentException(
            "no signature for sequence length ${encoding.width()} (the model has ${seqLens.joinToString()})",
        )
        val feeds = HashMap<String, Any>(4)
        for ((name, type) in sig.inputs) {
            val values = when (name) {
                "input_ids" -> encoding.inputIds()
                "attention_mask" -> encoding.attentionMask()
                "token_type_ids" -> encoding.tokenTypeIds()
                else -> throw IllegalStateException("unexpected model input '$name'")
            }
            feeds[name] = when (type) {
                DataType.INT32 -> arrayOf(values)
                DataType.INT64 -> arrayOf(LongArray(values.size) { values[it].toLong() })
                else -> throw IllegalStateException("model input '$name' is $type, not int32/int64")
            }
        }
        return when (sig.outputType) {
            DataType.FLOAT32 -> {
                val out = arrayOf(FloatArray(sig.numClasses))
                interpreter.runSignature(feeds, mapOf(sig.outputName to out), sig.key)
                out[0]
            }
            DataType.INT8, DataType.UINT8 -> {
                // int8-full artifacts with int8 outputs: dequantize with the tensor's params.
                val out = arrayOf(ByteArray(sig.numClasses))
                interpreter.runSignature(feeds, mapOf(sig.outputName to out), sig.key)
                val unsigned = sig.outputType == DataType.UINT8
                FloatArray(sig.numClasses) {
                    val q = if (unsigned) out[0][it].toInt() and 0xFF else out[0][it].toInt()
                    (q - sig.zeroPoint) * sig.scale
                }
            }
            else -> throw IllegalStateException("model output '${sig.outputName}' is ${sig.outputType}")
        }
    }

    override fun close() {
        interpreter.close()
        delegate?.close()
    }

    companion object {
        /**
         * Loads [model] on [choice]. Throws [DelegateUnsupportedException] when the delegate
         * is unavailable on this device or refuses the model; with [verify] it also runs one
         * inference per signature, so that a delegate failing only at run time is caught here.
         */
        fun open(model: ByteBuffer, choice: DelegateChoice, verify: Boolean = true): LiteRtClassifier {
            val options = Interpreter.Options()
            var delegate: Delegate? = null
            when (choice.kind) {
                DelegateChoice.Kind.CPU -> options.setNumThreads(choice.threads).setUseXNNPACK(false)
                DelegateChoice.Kind.XNNPACK -> options.setNumThreads(choice.threads).setUseXNNPACK(true)
                DelegateChoice.Kind.GPU -> {
                    val gpu = createGpuDelegate()
                    delegate = gpu
                    options.setUseXNNPACK(false).addDelegate(gpu)
                }
                DelegateChoice.Kind.NNAPI -> {
                    val nnapi = createNnApiDelegate()
                    delegate = nnapi
                    options.setUseXNNPACK(false).addDelegate(nnapi)
                }
            }
            val interpreter = try {
                Interpreter(model, options)
            } catch (e: Exception) {
                delegate?.close()
                if (delegate != null) {
                    throw DelegateUnsupportedException("${choice.label} refused the model (${firstLine(e)})")
                }
                throw e
            }
            val classifier = try {
                LiteRtClassifier(interpreter, delegate, choice, readSignatures(interpreter))
            } catch (e: Exception) {
                interpreter.close()
                delegate?.close()
                throw e
            }
            if (verify) {
                try {
                    for (len in classifier.seqLens) {
                        // [CLS] [SEP] then padding: any valid input exercises every op.
                        val ids = IntArray(len).also { it[0] = 2; it[1] = 3 }
                        val mask = IntArray(len).also { it[0] = 1; it[1] = 1 }
                        classifier.logits(Encoding.of(ids, mask, IntArray(len)))
                    }
                } catch (e: Exception) {
                    classifier.close()
                    if (delegate != null) {
                        throw DelegateUnsupportedException("${choice.label} failed to run the model (${firstLine(e)})")
                    }
                    throw e
                }
            }
            return classifier
        }

        /** [open] on [requested], else on [DelegateChoice.FALLBACK] with a message saying so. */
        fun openWithFallback(model: ByteBuffer, requested: DelegateChoice): Pair<LiteRtClassifier, String?> =
            try {
                open(model, requested) to null
            } catch (e: DelegateUnsupportedException) {
                val fallback = DelegateChoice.FALLBACK
                open(model, fallback) to "${requested.label} is not available: ${e.message}. Using ${fallback.label} instead."
            }

        private fun createGpuDelegate(): GpuDelegate {
            val compat = CompatibilityList()
            try {
                if (!compat.isDelegateSupportedOnThisDevice) {
                    throw DelegateUnsupportedException("the GPU delegate does not support this device's GPU")
                }
                return GpuDelegate(compat.bestOptionsForThisDevice)
            } catch (e: DelegateUnsupportedException) {
                throw e
            } catch (e: Throwable) {
                throw DelegateUnsupportedException("the GPU delegate could not start (${firstLine(e)})")
            } finally {
                compat.close()
            }
        }

        private fun createNnApiDelegate(): NnApiDelegate {
            // The gate lives in albert-core (AcceleratorPolicy) so JVM tests cover it.
            val nnapi = AcceleratorPolicy.nnapi(Build.VERSION.SDK_INT)
            if (!nnapi.available) throw DelegateUnsupportedException(nnapi.unavailableReason)
            return try {
                // No NNAPI CPU reference implementation: a device without an accelerator for
                // these ops should say so, not quietly run NNAPI's slow CPU path. The flag
                // only exists from API 29; below it the label says NNAPI may use its CPU path.
                val options = NnApiDelegate.Options()
                if (nnapi.canRefuseNnapiCpu) options.setUseNnapiCpu(false)
                NnApiDelegate(options)
            } catch (e: Throwable) {
                throw DelegateUnsupportedException("NNAPI could not start (${firstLine(e)})")
            }
        }

        private fun readSignatures(interpreter: Interpreter): Map<Int, SignatureIo> {
            val found = HashMap<Int, SignatureIo>()
            for (key in interpreter.signatureKeys) {
                val inputNames = interpreter.getSignatureInputs(key).toList()
                if ("input_ids" !in inputNames) {
                    throw IllegalArgumentException(
                        "signature '$key' has no input 'input_ids'; convert the model with `albert-edge convert --to tflite`",
                    )
                }
                val shape = interpreter.getInputTensorFromSignature("input_ids", key).shape()
                if (shape.size != 2 || shape[0] != 1) {
                    throw IllegalArgumentException(
                        "signature '$key' takes input_ids of shape ${shape.contentToString()}; this demo runs [1, L] " +
                            "sequence-classification models",
                    )
                }
                val inputs = inputNames.filter { it in INPUTS }.associateWith {
                    interpreter.getInputTensorFromSignature(it, key).dataType()
                }
                val outputNames = interpreter.getSignatureOutputs(key).toList()
                val outputName = if ("logits" in outputNames) "logits" else outputNames.first()
                val out = interpreter.getOutputTensorFromSignature(outputName, key)
                val q = out.quantizationParams()
                found[shape[1]] = SignatureIo(
                    key = key,
                    inputs = inputs,
                    outputName = outputName,
                    outputType = out.dataType(),
                    numClasses = out.shape().last(),
                    scale = q.scale,
                    zeroPoint = q.zeroPoint,
                )
            }
            if (found.isEmpty()) throw IllegalArgumentException("the model has no signatures to run")
            return found
        }

        private val INPUTS = setOf("input_ids", "attention_mask", "token_type_ids")

        fun firstLine(e: Throwable): String =
            (e.message ?: e.javaClass.simpleName).lineSequence().first().take(200)
    }
}
