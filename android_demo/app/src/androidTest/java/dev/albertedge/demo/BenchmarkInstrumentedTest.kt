package dev.albertedge.demo

import android.content.Intent
import androidx.test.core.app.ActivityScenario
import androidx.test.ext.junit.runners.AndroidJUnit4
import androidx.test.platform.app.InstrumentationRegistry
import org.json.JSONObject
import org.junit.Assert.assertEquals
import org.junit.Assert.assertTrue
import org.junit.Test
import org.junit.runner.RunWith
import java.io.File

/**
 * The unit a device farm runs: BenchmarkActivity on this device (a few runs per delegate
 * and length), then the written report is checked against the `albert-edge-bench/1`
 * schema keys the Python harness reads (albert_edge/bench/schema.py), so `albert-edge
 * bench --adb` rows and these rows land in one report. The report is left in the app's
 * external files dir for the farm to collect.
 */
@RunWith(AndroidJUnit4::class)
class BenchmarkInstrumentedTest {
    @Test
    fun benchmarkWritesTheBenchSchema() {
        val context = InstrumentationRegistry.getInstrumentation().targetContext
        val out = File(context.getExternalFilesDir(null) ?: context.filesDir, "albert-edge-bench.json")
        out.delete()
        val intent = Intent(context, BenchmarkActivity::class.java)
            .putExtra("runs", 5)
            .putExtra("warmup", 1)
            .putExtra("seq_lens", "128")
        ActivityScenario.launch<BenchmarkActivity>(intent).use {
            val deadline = System.currentTimeMillis() + 10 * 60 * 1000L
            while (!out.isFile && System.currentTimeMillis() < deadline) Thread.sleep(500)
        }
        assertTrue("no report at $out within 10 minutes", out.isFile)
        val report = JSONObject(out.readText())
        assertEquals("albert-edge-bench/1", report.getString("schema"))
        val results = report.getJSONArray("results")
        assertEquals(DelegateChoice.entries.size, results.length())
        var ok = 0
        for (i in 0 until results.length()) {
            val row = results.getJSONObject(i)
            for (key in REQUIRED) assertTrue("row $i lacks $key", row.has(key))
            val status = row.getString("status")
            assertTrue(status in setOf("ok", "skipped", "failed"))
            if (status == "ok") {
                ok++
                assertTrue(row.getJSONObject("latency_ms").getDouble("p50") > 0)
            } else {
                assertTrue("a $status row says why", row.getString("reason").isNotBlank())
            }
        }
        assertTrue("at least the CPU rows run on any device", ok >= 3)
    }

    private companion object {
        val REQUIRED = listOf(
            "artifact", "format", "precision", "backend", "device", "batch", "seq_len",
            "threads", "file_bytes", "floor_bytes", "load_ms", "latency_ms", "status", "reason",
        )
    }
}
