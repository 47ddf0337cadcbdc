// Runs albert-edge ONNX artifacts of the question-answering and token-classification heads,
// as written by `albert-edge convert`, in transformers.js (local files only). Driven by
// tests/clients/test_node_tasks.py; tasks_core.mjs holds the calls (shared with the browser page).
//
// usage: node run_tasks.mjs <request.json>
//   request: {models_dir, qa: {name, questions: [{question, context}]} | null,
//             ner: {name, sentences: [text]} | null}
// prints one JSON object: {qa: {...} | {error}, ner: {...} | {error}}
import { readFileSync } from 'node:fs';
import path from 'node:path';

import { runTasks } from './tasks_core.mjs';

const req = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const transformers = await import('@huggingface/transformers');
transformers.env.allowRemoteModels = false;
transformers.env.allowLocalModels = true;
transformers.env.localModelPath = path.resolve(req.models_dir) + path.sep;
const out = await runTasks(transformers, req);
process.stdout.write(JSON.stringify(out) + '\n');
