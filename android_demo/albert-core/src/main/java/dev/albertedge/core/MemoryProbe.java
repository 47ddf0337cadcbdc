package dev.albertedge.core;

import java.io.BufferedReader;
import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;

/**
 * Peak resident memory of this process, from {@code /proc/self/status} ({@code VmHWM}).
 *
 * <p>Linux and Android both have it; it counts the whole process (on Android: the ART
 * runtime and the app too, not just the model), which is what a user's phone pays.
 */
public final class MemoryProbe {
    private MemoryProbe() {}

    /** Peak RSS in bytes, or null where /proc is unavailable. */
    public static Long peakRssBytes() {
        try (BufferedReader r = new BufferedReader(new InputStreamReader(
                new FileInputStream("/proc/self/status"), StandardCharsets.US_ASCII))) {
            String line;
            while ((line = r.readLine()) != null) {
                if (line.startsWith("VmHWM:")) {
                    String[] parts = line.substring(6).trim().split("\\s+");
                    long kb = Long.parseLong(parts[0]);
                    return kb * 1024L;
                }
            }
        } catch (IOException | RuntimeException e) {
            return null;
        }
        return null;
    }
}
