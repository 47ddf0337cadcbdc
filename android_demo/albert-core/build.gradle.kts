// Plain Java library: tokenizer, pre/post-processing and the benchmark report, with no
// Android imports, so it builds and is tested on any JDK (tests/test_android_java.py
// compiles it with `javac --release 8` and runs these JUnit tests without Gradle).
plugins {
    `java-library`
}

java {
    sourceCompatibility = JavaVersion.VERSION_1_8
    targetCompatibility = JavaVersion.VERSION_1_8
}

tasks.withType<JavaCompile>().configureEach {
    options.encoding = "UTF-8"
    options.release.set(8)
    options.compilerArgs.addAll(listOf("-Xlint:all,-options", "-Werror"))
}

dependencies {
    testImplementation(libs.junit)
}

tasks.test {
    // The real ALBERT SentencePiece model: ../shared beside the repository, as in the
    // Python tests, or $ALBERT_EDGE_SHARED. Tests that need it are skipped without it.
    val shared = System.getenv("ALBERT_EDGE_SHARED") ?: rootProject.file("../../shared").path
    systemProperty("albert.spiece", "$shared/data/albert/30k-clean.model")
}
