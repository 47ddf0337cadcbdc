package dev.albertedge.core;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;

import org.junit.Test;

public class AcceleratorPolicyTest {
    @Test
    public void nnapiGateFollowsTheApiLevels() {
        AcceleratorPolicy.Nnapi n26 = AcceleratorPolicy.nnapi(26);
        assertFalse(n26.available);
        assertTrue(n26.unavailableReason.contains("API 27"));

        AcceleratorPolicy.Nnapi n28 = AcceleratorPolicy.nnapi(28);
        assertTrue(n28.available);
        assertFalse("setUseNnapiCpu needs API 29", n28.canRefuseNnapiCpu);
        assertTrue(n28.label.contains("CPU path"));

        AcceleratorPolicy.Nnapi n29 = AcceleratorPolicy.nnapi(29);
        assertTrue(n29.canRefuseNnapiCpu);
        assertFalse(n29.deprecated);
        assertEquals("NNAPI", n29.label);
        assertNull(n29.unavailableReason);

        AcceleratorPolicy.Nnapi n34 = AcceleratorPolicy.nnapi(34);
        assertFalse(n34.deprecated);
        AcceleratorPolicy.Nnapi n35 = AcceleratorPolicy.nnapi(35);
        assertTrue(n35.available && n35.deprecated);
        assertTrue(n35.label.contains("deprecated from Android 15"));
    }

    @Test
    public void gpuGetsTheGpuArtifactWhenPresent() {
        assertEquals("model_gpu.tflite", AcceleratorPolicy.modelFor("gpu", true));
        assertEquals("model.tflite", AcceleratorPolicy.modelFor("gpu", false));
        assertEquals("model.tflite", AcceleratorPolicy.modelFor("npu", true));
        assertEquals("model.tflite", AcceleratorPolicy.modelFor("cpu", true));
    }

    @Test
    public void pssDeltaIsPerModelAndNullWhenUnmeasured() {
        assertEquals(Long.valueOf(3L * 1024 * 1024), PssDelta.bytes(10_000, 10_000 + 3 * 1024));
        assertEquals(Long.valueOf(0L), PssDelta.bytes(10_000, 9_000));  // GC between samples
        assertNull(PssDelta.bytes(0, 5_000));
    }
}
