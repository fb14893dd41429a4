"""attnbench model: attention inside a Llama-style decoder step, and the Amdahl prediction beside it."""
