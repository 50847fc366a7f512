"""The Gemini API (`generateContent`, `streamGenerateContent`, `countTokens`, models) as an ingress
dialect: Gemini CLI, the google-genai SDKs and `@ai-sdk/google` (their base URL at the gateway)."""
