// The Vercel AI SDK's Google provider (@ai-sdk/google) pointed at the gateway: a tool loop with
// generateText, then streamText. Run by tests/e2e/test_ai_sdk_google.py with the model group and
// base URL as arguments; prints one JSON line with what came back.
import { generateText, stepCountIs, streamText } from 'ai';
import { createGoogleGenerativeAI } from '@ai-sdk/google';
import { weather } from './ai_sdk_weather.mjs';

const [model, baseURL] = process.argv.slice(2);
const google = createGoogleGenerativeAI({ baseURL, apiKey: 'client-key-never-forwarded' });

const loop = await generateText({
  model: google(model),
  prompt: 'Weather in Paris?',
  tools: { get_weather: weather },
  stopWhen: stepCountIs(3),
});
const stream = streamText({ model: google(model), prompt: 'Say something streamed.' });
let streamed = '';
for await (const delta of stream.textStream) streamed += delta;
console.log(
  JSON.stringify({
    steps: loop.steps.length,
    calls: loop.steps.flatMap((s) => s.toolCalls.map((c) => [c.toolName, c.input])),
    text: loop.text,
    finish: loop.finishReason,
    streamed,
    streamFinish: await stream.finishReason,
  }),
);
