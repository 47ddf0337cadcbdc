import org.jetbrains.kotlin.gradle.dsl.JvmTarget

plugins {
    alias(libs.plugins.android.application)
    alias(libs.plugins.kotlin.android)
}

android {
    namespace = "dev.albertedge.demo"
    compileSdk = 35

    defaultConfig {
        applicationId = "dev.albertedge.demo"
        minSdk = 24
        targetSdk = 35
        versionCode = 1
        versionName = "0.1.0"
        // app/src/androidTest: runs the benchmark on a device and checks the bench JSON.
        testInstrumentationRunner = "androidx.test.runner.AndroidJUnitRunner"
    }

    buildTypes {
        release {
            isMinifyEnabled = false
            proguardFiles(
                getDefaultProguardFile("proguard-android-optimize.txt"),
                "proguard-rules.pro",
            )
        }
    }

    compileOptions {
        sourceCompatibility = JavaVersion.VERSION_17
        targetCompatibility = JavaVersion.VERSION_17
    }

    // model.tflite is memory-mapped straight out of the APK, which needs it uncompressed.
    androidResources {
        noCompress += "tflite"
    }
}

kotlin {
    compilerOptions {
        jvmTarget.set(JvmTarget.JVM_17)
    }
}

// Fail early, with the fix, when the assets were not generated.
val checkAssets by tasks.registering {
    val assets = layout.projectDirectory.dir("src/main/assets")
    doLast {
        val missing = listOf("model.tflite", "spiece.model", "model_info.json")
            .filter { !assets.file(it).asFile.isFile }
        if (missing.isNotEmpty()) {
            throw GradleException(
                "app/src/main/assets lacks $missing: run android_demo/scripts/prepare_assets.sh first",
            )
        }
    }
}
tasks.named("preBuild") { dependsOn(checkAssets) }

dependencies {
    implementation(project(":albert-core"))
    implementation(libs.androidx.core.ktx)
    implementation(libs.androidx.appcompat)
    implementation(libs.androidx.constraintlayout)
    implementation(libs.androidx.lifecycle.runtime.ktx)
    implementation(libs.material)
    implementation(libs.kotlinx.coroutines.android)
    implementation(libs.litert)
    implementation(libs.litert.gpu)
    implementation(libs.litert.gpu.api)
    androidTestImplementation(libs.androidx.test.core)
    androidTestImplementation(libs.androidx.test.runner)
    androidTestImplementation(libs.androidx.test.ext.junit)
}
