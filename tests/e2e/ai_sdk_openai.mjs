// The Vercel AI SDK's OpenAI provider (@ai-sdk/openai) on its default path: `openai(model)` is the
// Responses API with `store: true`, so from step 2 on the tool loop names the earlier answer's
// reasoning and text items by id (`item_reference`) and sends its function calls in full. Run by
// tests/e2e/test_ai_sdk_openai.py with the model group, the base URL and `generate` or `stream`;
// prints one JSON line with what came back.
import { generateText, stepCountIs, streamText } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { weather } from './ai_sdk_weather.mjs';

const [model, baseURL, mode] = process.argv.slice(2);
const openai = createOpenAI({ baseURL, apiKey: 'client-key-never-forwarded' });
const options = {
  model: openai(model),
  prompt: 'Weather in Paris?',
  tools: { get_weather: weather },
  stopWhen: stepCountIs(3),
};

let result;
if (mode === 'stream') {
  const stream = streamText({ ...options, onError: ({ error }) => { throw error; } });
  let streamed = '';
  for await (const delta of stream.textStream) streamed += delta;
  result = { steps: await stream.steps, text: streamed, finish: await stream.finishReason };
} else {
  const loop = await generateText(options);
  result = { steps: loop.steps, text: loop.text, finish: loop.finishReason };
}
console.log(
  JSON.stringify({
    steps: result.steps.length,
    calls: result.steps.flatMap((s) => s.toolCalls.map((c) => [c.toolName, c.input])),
    results: result.steps.flatMap((s) => s.toolResults.map((r) => r.output)),
    text: result.text,
    finish: result.finish,
  }),
);
