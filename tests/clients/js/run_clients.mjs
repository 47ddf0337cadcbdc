// Runs an albert-edge ONNX artifact, as written by `albert-edge convert`, in the Node
// clients a user already has: transformers.js pipeline (local files only),
// onnxruntime-node and onnxruntime-web (wasm). Driven by tests/clients/test_node_clients.py.
//
// usage: node run_clients.mjs <request.json>
//   request: {artifact_dir, model_file, sentences: [..], feeds: [{input_ids, attention_mask,
//             token_type_ids}] (one per sentence, already tokenized by Python), clients: [..]}
// prints one JSON object: {client: {labels|logits|error}}
import { readFileSync } from 'node:fs';
import path from 'node:path';

const req = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const out = {};

function tensors(ort, feed) {
  const t = {};
  for (const [name, ids] of Object.entries(feed)) {
    t[name] = new ort.Tensor('int64', BigInt64Array.from(ids.map(BigInt)), [1, ids.length]);
  }
  return t;
}

async function runOrt(ort, opts) {
  const session = await ort.InferenceSession.create(
    path.join(req.artifact_dir, req.model_file), opts);
  const logits = [];
  for (const feed of req.feeds) {
    const r = await session.run(tensors(ort, feed));
    logits.push(Array.from(r.logits.data));
  }
  return { logits };
}

for (const client of req.clients) {
  try {
    if (client === 'transformers.js') {
      const { env, pipeline } = await import('@huggingface/transformers');
      env.allowRemoteModels = false;
      env.allowLocalModels = true;
      env.localModelPath = path.dirname(path.resolve(req.artifact_dir)) + path.sep;
      const clf = await pipeline('sentiment-analysis', path.basename(req.artifact_dir));
      const labels = [];
      const scores = [];
      for (const s of req.sentences) {
        const [r] = await clf(s);
        labels.push(r.label);
        scores.push(r.score);
      }
      out[client] = { labels, scores };
    } else if (client === 'transformers.js-tokenizer') {
      const { env, AutoTokenizer } = await import('@huggingface/transformers');
      env.allowRemoteModels = false;
      env.localModelPath = path.dirname(path.resolve(req.artifact_dir)) + path.sep;
      const tok = await AutoTokenizer.from_pretrained(path.basename(req.artifact_dir));
      const ids = [];
      for (const s of req.sentences) {
        ids.push(Array.from(tok(s).input_ids.data, Number));
      }
      out[client] = { ids };
    } else if (client === 'onnxruntime-node') {
      const ort = (await import('onnxruntime-node')).default;
      out[client] = await runOrt(ort, {});
    } else if (client === 'onnxruntime-web') {
      const ort = await import('onnxruntime-web');
      ort.env.wasm.numThreads = 1;
      out[client] = await runOrt(ort, { executionProviders: ['wasm'] });
    } else {
      out[client] = { error: `unknown client ${client}` };
    }
  } catch (e) {
    out[client] = { error: String(e && e.stack ? e.stack : e).slice(0, 2000) };
  }
}
process.stdout.write(JSON.stringify(out) + '\n');
