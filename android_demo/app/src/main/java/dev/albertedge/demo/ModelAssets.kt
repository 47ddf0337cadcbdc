package dev.albertedge.demo

import android.content.Context
import dev.albertedge.core.AlbertTokenizer
import dev.albertedge.core.SentencePieceModel
import org.json.JSONObject
import java.io.FileInputStream
import java.io.FileNotFoundException
import java.nio.MappedByteBuffer
import java.nio.channels.FileChannel

/** A required asset is missing from the APK: say which, and how to generate it. */
class MissingAssetException(name: String) : Exception(
    "assets/$name is missing from the APK: run android_demo/scripts/prepare_assets.sh, then rebuild",
)

/** What scripts/prepare_assets.sh wrote beside the model (from its manifest and config). */
data class ModelInfo(
    val artifact: String,
    val precision: String,
    val labels: List<String>,
    val seqLens: List<Int>,
    val fileBytes: Long?,
    val floorBytes: Long?,
    /** model_gpu.tflite's predicted GPU coverage (albert-edge inspect), null if absent. */
    val gpuModel: GpuModelInfo? = null,
)

/** The fp16 GPU-clean artifact: ops in one signature, ops the GPU takes, CPU partitions. */
data class GpuModelInfo(val file: String, val ops: Int, val gpuOps: Int, val cpuPartitions: Int)

/**
 * The generated assets: `model.tflite` (memory-mapped; stored uncompressed, see
 * app/build.gradle.kts), `spiece.model`, `model_info.json` and `bench_sentences.txt`.
 */
object ModelAssets {
    const val MODEL = "model.tflite"
    const val SPIECE = "spiece.model"
    const val INFO = "model_info.json"
    const val SENTENCES = "bench_sentences.txt"

    fun info(context: Context): ModelInfo {
        val json = JSONObject(readText(context, INFO))
        val labels = json.getJSONArray("labels")
        val seqLens = json.getJSONArray("seq_lens")
        return ModelInfo(
            artifact = json.getString("artifact"),
            precision = json.getString("precision"),
            labels = List(labels.length()) { labels.getString(it) },
            seqLens = List(seqLens.length()) { seqLens.getInt(it) },
            fileBytes = json.optLong("file_bytes", -1).takeIf { it > 0 },
            floorBytes = json.optLong("floor_bytes", -1).takeIf { it > 0 },
            gpuModel = json.optJSONObject("gpu_model")?.let {
                GpuModelInfo(it.getString("file"), it.getInt("ops"), it.getInt("gpu_ops"), it.getInt("cpu_partitions"))
            },
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

    /** The model, mapped read-only from the APK (no copy into the Java heap). */
    fun mapModel(context: Context, name: String = MODEL): MappedByteBuffer {
        val fd = try {
            context.assets.openFd(name)
        } catch (e: FileNotFoundException) {
            throw MissingAssetException(name)
        }
        return fd.use {
            FileInputStream(it.fileDescriptor).channel.use { channel ->
                channel.map(FileChannel.MapMode.READ_ONLY, it.startOffset, it.declaredLength)
            }
        }
    }

    /** Benchmark inputs: real SST-2 dev sentences (never random ids). */
    fun benchSentences(context: Context): List<String> =
        readText(context, SENTENCES).lines().map { it.trim() }.filter { it.isNotEmpty() }

    private fun readText(context: Context, name: String): String = try {
        context.assets.open(name).bufferedReader(Charsets.UTF_8).use { it.readText() }
    } catch (e: FileNotFoundException) {
        throw MissingAssetException(name)
    }
}
