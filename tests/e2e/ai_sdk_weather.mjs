// The tool the Vercel AI SDK drivers (ai_sdk_google.mjs, ai_sdk_openai.mjs) give their models.
import { jsonSchema, tool } from 'ai';

export const weather = tool({
  description: 'Current weather for a city',
  inputSchema: jsonSchema({
    type: 'object',
    properties: { city: { type: 'string' } },
    required: ['city'],
    additionalProperties: false,
  }),
  execute: async ({ city }) => `sunny in ${city}`,
});
