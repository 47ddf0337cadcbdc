// transformers.js on albert-edge's question-answering and token-classification artifacts:
// the calls a user makes, shared by run_tasks.mjs (Node) and tasks_page.html (Chromium).
//
// Question answering: pipeline('question-answering', <dir>), as documented.
// Token classification: transformers.js (4.3) maps no ALBERT model to that task, so
// pipeline('token-classification', <dir>) refuses the model type (its message is returned
// under ner.pipeline_error); the same TokenClassificationPipeline class runs it when given
// the model loaded by AutoModel (its outputs by name, `logits` among them) and the tokenizer.

function errorText(e) {
  return String(e && e.stack ? e.stack : e).slice(0, 2000);
}

export async function runTasks(t, req) {
  const out = {};
  if (req.qa) {
    try {
      const qa = await t.pipeline('question-answering', req.qa.name);
      const answers = [];
      const scores = [];
      const ids = [];
      for (const q of req.qa.questions) {
        const r = await qa(q.question, q.context);
        answers.push(r.answer);
        scores.push(r.score);
        // the ids the pipeline fed the model (its own tokenizer call)
        const enc = qa.tokenizer(q.question, { text_pair: q.context, padding: true, truncation: true });
        ids.push(Array.from(enc.input_ids.data, Number));
      }
      out.qa = { answers, scores, ids };
    } catch (e) {
      out.qa = { error: errorText(e) };
    }
  }
  if (req.ner) {
    const name = req.ner.name;
    let pipelineError = null;
    try {
      await t.pipeline('token-classification', name);
    } catch (e) {
      pipelineError = String(e && e.message ? e.message : e);
    }
    try {
      const tokenizer = await t.AutoTokenizer.from_pretrained(name);
      const model = await t.AutoModel.from_pretrained(name);
      const ner = new t.TokenClassificationPipeline({ task: 'token-classification', model, tokenizer });
      const tokens = [];
      const groups = [];
      const ids = [];
      for (const s of req.ner.sentences) {
        const raw = await ner(s, { ignore_labels: [] });
        tokens.push(raw.map((x) => [x.index, x.entity, x.score]));
        const simple = await ner(s, { aggregation_strategy: 'simple' });
        groups.push(simple.map((x) => [x.entity_group, x.word]));
        ids.push(Array.from(tokenizer(s).input_ids.data, Number));
      }
      out.ner = { pipeline_error: pipelineError, model_class: model.constructor.name, tokens, groups, ids };
    } catch (e) {
      out.ner = { error: errorText(e), pipeline_error: pipelineError };
    }
  }
  return out;
}
