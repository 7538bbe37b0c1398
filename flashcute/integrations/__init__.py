"""Integrations of flashcute with model libraries; each one imports its library only when it is used."""
