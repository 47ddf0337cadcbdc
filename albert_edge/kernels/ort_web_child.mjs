// Child process: run one ONNX model with onnxruntime-web (WebAssembly, SIMD) in Node.
// Same wire format as _ort_child.py: one JSON line per request naming a directory of raw
// little-endian arrays; the answer names the output arrays written beside them.
// Usage: node ort_web_child.mjs MODEL THREADS   (NODE_PATH: where onnxruntime-web lives)
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";
import readline from "node:readline";

const require = createRequire(path.join(process.env.ALBERT_EDGE_NODE_MODULES ?? process.cwd(), "x.js"));
const ort = require("onnxruntime-web");

const ARRAYS = {
  int64: BigInt64Array, int32: Int32Array, int8: Int8Array, uint8: Uint8Array,
  bool: Uint8Array, float32: Float32Array,
};

function readArray(dir, d) {
  const buf = fs.readFileSync(path.join(dir, d.file));
  const Ctor = ARRAYS[d.dtype];
  const data = new Ctor(buf.buffer, buf.byteOffset, buf.byteLength / Ctor.BYTES_PER_ELEMENT);
  return new ort.Tensor(d.dtype, Ctor === BigInt64Array ? data : Ctor.from(data), d.shape);
}

async function main() {
  const [model, threads] = process.argv.slice(2);
  ort.env.wasm.numThreads = Number(threads) || 1;
  ort.env.logLevel = "error";
  const session = await ort.InferenceSession.create(fs.readFileSync(model), {
    executionProviders: ["wasm"],
  });
  const hello = {
    runtime: `onnxruntime-web ${ort.env.versions?.web ?? "?"} (wasm)`,
    machine: "wasm32",
    inputs: session.inputNames.map((name) => ({ name })),
    outputs: session.outputNames,
  };
  process.stdout.write(JSON.stringify(hello) + "\n");
  const rl = readline.createInterface({ input: process.stdin });
  for await (const line of rl) {
    if (!line.trim()) continue;
    const req = JSON.parse(line);
    try {
      const feeds = {};
      for (const [name, d] of Object.entries(req.feeds)) {
        if (session.inputNames.includes(name)) feeds[name] = readArray(req.dir, d);
      }
      const result = await session.run(feeds);
      const outputs = {};
      session.outputNames.forEach((name, i) => {
        const t = result[name];
        const file = `out${i}.bin`;
        const data = t.data;
        fs.writeFileSync(path.join(req.dir, file), Buffer.from(data.buffer, data.byteOffset, data.byteLength));
        outputs[name] = { dtype: t.type, shape: t.dims, file };
      });
      process.stdout.write(JSON.stringify({ outputs }) + "\n");
    } catch (err) {
      process.stdout.write(JSON.stringify({ error: String(err?.message ?? err) }) + "\n");
    }
  }
}

main().catch((err) => {
  process.stdout.write(JSON.stringify({ error: String(err?.message ?? err) }) + "\n");
  process.exit(1);
});
