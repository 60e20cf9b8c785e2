"""Steps marked from a training framework's hooks (Lightning, Hugging Face Trainer); the callbacks
users import stay in steptrace.lightning and steptrace.transformers."""
