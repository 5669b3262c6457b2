#!/usr/bin/env python3
"""Deterministic generator of the bundled demo choice sets (data/).

    python3 scripts/gen-data.py tools [--count N] > data/tools.txt

Tool names look like `service.verb_object` (e.g. `github.create_issue`, `slack.list_channels`). Every
(service, verb, object) combination of the tables below is a candidate; candidates are ordered by the sha256 of
the name (stable across Python versions and machines) and the first N are kept, always including the gold
answers of data/tools-prompts.tsv (the CORE list). Output is sorted, one name per line.
"""
import argparse
import hashlib
import sys

SERVICES = {
    "github": ["issue", "pull_request", "repository", "branch", "commit", "release", "comment", "label",
               "workflow_run", "gist", "webhook", "deploy_key"],
    "gitlab": ["merge_request", "issue", "project", "pipeline", "branch", "tag", "runner", "snippet"],
    "jira": ["issue", "project", "sprint", "board", "comment", "worklog", "epic", "version"],
    "slack": ["message", "channel", "reminder", "reaction", "file", "user_group", "bookmark", "status"],
    "discord": ["message", "channel", "role", "member", "invite", "thread", "emoji"],
    "gmail": ["email", "draft", "label", "thread", "filter", "attachment"],
    "outlook": ["email", "event", "contact", "folder", "rule", "calendar"],
    "google_calendar": ["event", "calendar", "reminder", "attendee", "free_busy_slot"],
    "google_drive": ["file", "folder", "permission", "comment", "revision", "shared_drive"],
    "dropbox": ["file", "folder", "shared_link", "file_request", "team_member"],
    "notion": ["page", "database", "block", "comment", "user"],
    "confluence": ["page", "space", "attachment", "comment", "label"],
    "stripe": ["payment", "customer", "invoice", "subscription", "refund", "charge", "coupon", "payout",
               "price", "product", "dispute", "checkout_session"],
    "paypal": ["payment", "invoice", "payout", "order", "dispute", "subscription"],
    "shopify": ["order", "product", "customer", "inventory_item", "fulfillment", "discount_code", "collection"],
    "salesforce": ["lead", "opportunity", "account", "contact", "case", "campaign", "task", "report"],
    "hubspot": ["contact", "deal", "company", "ticket", "email_campaign", "form", "note"],
    "zendesk": ["ticket", "user", "organization", "macro", "article", "satisfaction_rating"],
    "intercom": ["conversation", "contact", "article", "tag", "note"],
    "twilio": ["sms", "call", "phone_number", "recording", "verification"],
    "sendgrid": ["email", "template", "contact_list", "suppression", "sender"],
    "mailchimp": ["campaign", "audience", "member", "template", "segment"],
    "aws_s3": ["bucket", "object", "bucket_policy", "presigned_url", "lifecycle_rule"],
    "aws_ec2": ["instance", "security_group", "volume", "snapshot", "key_pair", "image"],
    "aws_lambda": ["function", "alias", "layer", "event_source_mapping", "invocation"],
    "gcp_storage": ["bucket", "object", "signed_url", "notification"],
    "azure_devops": ["work_item", "pipeline", "repository", "pull_request", "build"],
    "kubernetes": ["pod", "deployment", "service", "config_map", "secret", "namespace", "job", "ingress"],
    "docker": ["container", "image", "volume", "network"],
    "postgres": ["table", "query", "index", "row", "schema", "backup"],
    "mysql": ["table", "query", "index", "row", "database"],
    "redis": ["key", "hash", "list", "stream", "cache_entry"],
    "elasticsearch": ["index", "document", "alias", "snapshot", "query"],
    "datadog": ["monitor", "dashboard", "metric", "event", "incident", "log"],
    "pagerduty": ["incident", "service", "schedule", "escalation_policy", "oncall"],
    "sentry": ["issue", "event", "release", "project", "alert_rule"],
    "linear": ["issue", "project", "cycle", "team", "comment", "label"],
    "asana": ["task", "project", "section", "comment", "tag", "portfolio"],
    "trello": ["card", "board", "list", "checklist", "label", "member"],
    "airtable": ["record", "table", "base", "view", "field"],
    "zoom": ["meeting", "webinar", "recording", "participant", "registrant"],
    "spotify": ["playlist", "track", "album", "artist", "queue_item"],
    "youtube": ["video", "playlist", "comment", "channel", "caption", "subscription"],
    "twitter": ["tweet", "direct_message", "follower", "list", "bookmark"],
    "linkedin": ["post", "connection", "job_posting", "company_page", "message"],
    "weather": ["forecast", "current_conditions", "alert", "air_quality", "historical_data"],
    "maps": ["route", "place", "geocode", "distance_matrix", "timezone", "elevation"],
    "translate": ["text", "document", "glossary", "language"],
    "calendar": ["event", "reminder", "availability", "booking"],
    "filesystem": ["file", "directory", "symlink", "permission", "archive"],
    "http": ["request", "webhook", "cookie", "header"],
    "openai": ["completion", "embedding", "file", "fine_tune_job", "image", "moderation"],
    "quickbooks": ["invoice", "bill", "customer", "vendor", "payment", "journal_entry", "expense"],
    "xero": ["invoice", "contact", "bank_transaction", "payment", "quote"],
    "workday": ["employee", "time_off_request", "position", "payroll_result"],
    "bamboohr": ["employee", "time_off_request", "report", "applicant"],
    "greenhouse": ["candidate", "application", "job", "interview", "offer"],
    "okta": ["user", "group", "application", "policy", "session"],
    "auth0": ["user", "role", "client", "connection", "log"],
    "vercel": ["deployment", "project", "domain", "env_variable"],
    "netlify": ["site", "deploy", "form_submission", "build_hook"],
    "cloudflare": ["dns_record", "zone", "firewall_rule", "worker", "cache"],
    "figma": ["file", "comment", "component", "project", "version"],
    "docusign": ["envelope", "template", "recipient", "document"],
    "calendly": ["event_type", "scheduled_event", "invitee", "webhook"],
    "ups": ["shipment", "tracking_info", "rate", "pickup", "label"],
    "fedex": ["shipment", "tracking_info", "rate", "pickup", "label"],
}

VERBS = ["create", "get", "list", "update", "delete", "search", "archive", "restore", "export", "import",
         "count", "assign", "close", "reopen", "send", "cancel", "approve", "sync", "refund", "schedule",
         "duplicate", "move", "share", "download", "upload", "validate", "publish", "subscribe_to", "watch",
         "preview"]
PLURAL_VERBS = {"list", "search", "export", "import", "count", "sync"}

# The gold answers of data/tools-prompts.tsv: always in the set.
CORE = [
    "github.create_issue", "slack.send_message", "stripe.refund_payment", "google_calendar.create_event",
    "github.list_pull_requests", "dropbox.delete_file", "jira.create_issue", "weather.get_forecast",
    "gmail.send_email", "kubernetes.list_pods",
]


def plural(word: str) -> str:
    head, _, last = word.rpartition("_")
    prefix = head + "_" if head else ""
    if last.endswith(("s", "x", "ch", "sh")):
        last += "es"
    elif last.endswith("y") and last[-2:-1] not in "aeiou":
        last = last[:-1] + "ies"
    else:
        last += "s"
    return prefix + last


def tool_names():
    names = set()
    for service, objects in SERVICES.items():
        for obj in objects:
            for verb in VERBS:
                o = plural(obj) if verb in PLURAL_VERBS else obj
                names.add(f"{service}.{verb}_{o}")
    return names


def key(name: str) -> bytes:
    return hashlib.sha256(name.encode("utf-8")).digest()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kind", choices=["tools"])
    ap.add_argument("--count", type=int, default=4000, help="number of names (default 4000)")
    args = ap.parse_args()
    names = tool_names()
    missing = [c for c in CORE if c not in names]
    if missing:
        print(f"gen-data: CORE names not generated: {missing}", file=sys.stderr)
        return 1
    if args.count > len(names):
        print(f"gen-data: only {len(names)} names available", file=sys.stderr)
        return 1
    rest = sorted((n for n in names if n not in CORE), key=key)
    chosen = sorted(CORE + rest[: max(0, args.count - len(CORE))])
    sys.stdout.write("".join(n + "\n" for n in chosen))
    return 0


if __name__ == "__main__":
    sys.exit(main())
