package dev.albertedge.core;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import org.junit.Test;

public class DelegateCoverageTest {
    @Test
    public void refusedDelegateIsAFallbackNotAGpuRow() {
        DelegateCoverage c = DelegateCoverage.decide("GPU", false, 275, 268, 1, null);
        assertEquals(DelegateCoverage.Status.FELL_BACK, c.status);
        assertEquals(0, c.delegatedOps);
        assertTrue(c.message.contains("refused"));
    }

    @Test
    public void int8ModelWithNoGpuOpsFallsBackEvenIfTheDelegateStarted() {
        DelegateCoverage c = DelegateCoverage.decide("GPU", true, 300, 0, 1, null);
        assertEquals(DelegateCoverage.Status.FELL_BACK, c.status);
    }

    @Test
    public void embeddingOnCpuIsPartialWithOnePartition() {
        DelegateCoverage c = DelegateCoverage.decide("GPU", true, 275, 268, 1, null);
        assertEquals(DelegateCoverage.Status.PARTIAL, c.status);
        assertEquals("GPU: 268/275 ops, 1 CPU partition", c.message);
    }

    @Test
    public void fullAndDisagreement() {
        assertEquals(DelegateCoverage.Status.FULL,
                DelegateCoverage.decide("GPU", true, 10, 10, 0, Boolean.TRUE).status);
        assertEquals(DelegateCoverage.Status.PARTIAL,
                DelegateCoverage.decide("GPU", true, 10, 8, 1, Boolean.FALSE).status);
        assertEquals(DelegateCoverage.Status.DISAGREES,
                DelegateCoverage.decide("GPU", true, 10, 10, 0, Boolean.FALSE).status);
    }

    @Test(expected = IllegalArgumentException.class)
    public void impossibleCountsAreRejected() {
        DelegateCoverage.decide("GPU", true, 10, 11, 0, null);
    }
}
