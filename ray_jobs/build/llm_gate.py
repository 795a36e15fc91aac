"""Whether a run enriches captions, with which server, and that the server answers before any
work starts. The driver resolves the URL and key; only the enrichment actors get the key."""

from __future__ import annotations

from typing import Any

from ray_jobs.config import Settings


def enrichment_plan(settings: Settings) -> dict[str, Any]:
    """Whether this run enriches captions, and if not, why (the report says so)."""
    from ray_jobs.longcap.client import server_url

    cfg = settings.longcap
    try:
        base_url = server_url(cfg)
    except ValueError:
        base_url = None
    if not cfg.enabled:
        reason = "disabled in the config (longcap.enabled: false)"
    elif not base_url:
        reason = "no LLM server configured (set PMCVL_LLM_BASE_URL or longcap.base_url)"
    else:
        from ray_jobs.longcap.prompting import load_prompts

        return {
            "enabled": True,
            "reason": None,
            "base_url": base_url,
            "model": cfg.model,
            "vision_model": cfg.vision_model or cfg.model,
            "prompt_version": load_prompts().version,
        }
    return {"enabled": False, "reason": reason, "model": None, "prompt_version": None}


def resolve_llm(settings: Settings, base_url: str) -> Settings:
    """The server URL and key as the driver sees them (config, else environment), written into
    the settings the workers get: a cluster's workers do not share the driver's environment."""
    from pydantic import SecretStr

    from ray_jobs.longcap.client import api_key

    longcap = settings.longcap.model_copy(
        update={"base_url": base_url, "api_key": SecretStr(api_key(settings.longcap))}
    )
    return settings.model_copy(update={"longcap": longcap})


def without_llm_key(settings: Settings) -> Settings:
    return settings.model_copy(
        update={"longcap": settings.longcap.model_copy(update={"api_key": None})}
    )


def check_llm(plan: dict[str, Any], settings: Settings) -> None:
    """A dead LLM server, or one without our models, stops the run before any work."""
    import asyncio

    from ray_jobs.longcap.client import LLMClient

    async def probe() -> tuple[int, list[str]]:
        client = LLMClient(settings.longcap.model_copy(update={"max_retries": 0}))
        try:
            code = await client.health()
            return code, (await client.models() if code == 200 else [])
        finally:
            await client.aclose()

    from ray_jobs.longcap.client import redact_url

    where = redact_url(plan["base_url"])
    try:
        code, models = asyncio.run(probe())
    except Exception as exc:
        raise SystemExit(f"LLM server {where} is not reachable: {exc}") from exc
    missing = sorted({plan["model"], plan["vision_model"]} - set(models))
    if code != 200 or missing:
        why = f"/health answered {code}" if code != 200 else f"it does not serve {missing}"
        raise SystemExit(f"LLM server {where} is not usable: {why}")
