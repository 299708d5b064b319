"""Renderings of the evidence model: Markdown, HTML, SARIF 2.1.0 and JUnit XML."""
