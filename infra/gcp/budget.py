"""Where GCP's budget gauges come from: the budget's Pub/Sub notifications, and the budget job's identity.

Cloud Billing's Budgets API returns no spend. A budget whose `allUpdatesRule.pubsubTopic` is set (with
`schemaVersion` "1.0", infra/gcp/audit.py) publishes its status to that topic several times a day
(cloud.google.com/billing/docs/how-to/budgets-programmatic-notifications). This declares the topic, its
pull subscription and the budget CronJob's own Google service account (infra/k8s/budget.py), bound by GKE
Workload Identity to `cost/budget` and allowed `roles/pubsub.subscriber` on that one subscription: pull
and acknowledge there, nothing else (no project role, no topic role, no bucket).
"""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from infra.config import PlatformConfig
from infra.gcp import roles
from infra.naming import tags
from infra.shape import BUDGET_IDENTITY, BUDGET_SERVICE_ACCOUNT, BudgetJob

# Cloud Billing publishes budget notifications as this Google-managed account. Connecting a topic to a
# budget makes Cloud Billing grant it Pub/Sub Publisher on the topic itself (the caller needs
# `pubsub.topics.setIamPolicy` on the topic: BudgetAllUpdatesRule.pubsubTopic in the Budget API
# reference); declared here too, so the grant is reviewed in code and not lost if the topic's policy is
# ever rewritten.
BILLING_PUBLISHER = "serviceAccount:billing-budget-alert@system.gserviceaccount.com"
PUBLISHER_ROLE = "roles/pubsub.publisher"
# pubsub.subscriptions.consume (pull, acknowledge, modifyAckDeadline) and .get, on the subscription only.
SUBSCRIBER_ROLE = "roles/pubsub.subscriber"
# The job runs hourly; a week is Pub/Sub's default retention and covers a long outage of the cluster.
RETENTION = "604800s"
ACK_DEADLINE_S = 60  # one run pulls, pushes to the Pushgateway, then acknowledges: well under a minute


def subscription_path(project: str, subscription_id: str) -> str:
    """`projects/<p>/subscriptions/<s>`: the REST resource name `monitoring budget --subscription` takes."""
    return f"projects/{project}/subscriptions/{subscription_id}"


class BudgetNotifications(pulumi.ComponentResource):
    """The budget's notification topic, the job's pull subscription and the job's identity."""

    topic: gcp.pubsub.Topic
    topic_path: str
    job: BudgetJob

    def __init__(self, name: str, cfg: PlatformConfig, *, project: str, opts: pulumi.ResourceOptions) -> None:
        super().__init__("eu-ml-platform:gcp:BudgetNotifications", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        topic_id, subscription_id = f"{cfg.name}-budget", f"{cfg.name}-budget-job"
        self.topic_path = f"projects/{project}/topics/{topic_id}"
        self.topic = gcp.pubsub.Topic(
            f"{name}-topic",
            name=topic_id,
            project=project,
            labels=tags(cfg),
            # EU residency: messages are stored only in the stack's region. Not `enforce_in_transit`: Cloud
            # Billing publishes from its own endpoints, and Google's setup guide warns that topics enforcing
            # in-transit restrictions can fail to connect to a budget.
            message_storage_policy=gcp.pubsub.TopicMessageStoragePolicyArgs(
                allowed_persistence_regions=[cfg.region]
            ),
            # No CMEK: a notification holds a budget's name and amounts (no personal data), Google encrypts
            # Pub/Sub at rest by default, and neither the policy pack nor the Billing docs ask for a key here
            # (a key would also need the Pub/Sub service agent granted on the environment key).
            opts=child,
        )
        gcp.pubsub.TopicIAMMember(
            f"{name}-billing-publisher",
            project=project,
            topic=self.topic.name,
            role=PUBLISHER_ROLE,
            member=BILLING_PUBLISHER,
            opts=child,
        )
        subscription = gcp.pubsub.Subscription(
            f"{name}-subscription",
            name=subscription_id,
            project=project,
            labels=tags(cfg),
            topic=self.topic_path,  # the deterministic name (known in a preview), after the topic
            ack_deadline_seconds=ACK_DEADLINE_S,
            message_retention_duration=RETENTION,
            retain_acked_messages=False,
            # Never expire (the default deletes a subscription idle for 31 days, e.g. a paused cluster).
            expiration_policy=gcp.pubsub.SubscriptionExpirationPolicyArgs(ttl=""),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.topic]),
        )
        account_id = roles.account_id(cfg, BUDGET_IDENTITY)
        account = gcp.serviceaccount.Account(
            f"{name}-job",
            account_id=account_id,
            project=project,
            display_name=f"{cfg.name} budget job",
            opts=child,
        )
        email = roles.service_account_email(account_id, project)
        after_account = pulumi.ResourceOptions(parent=self, depends_on=[account])
        gcp.serviceaccount.IAMMember(
            f"{name}-job-workload-identity",
            service_account_id=account.name,
            role=roles.WORKLOAD_IDENTITY_ROLE,
            member=roles.workload_identity_member(project, BUDGET_SERVICE_ACCOUNT),
            opts=after_account,
        )
        gcp.pubsub.SubscriptionIAMMember(
            f"{name}-job-subscriber",
            project=project,
            subscription=subscription.name,
            role=SUBSCRIBER_ROLE,
            member=f"serviceAccount:{email}",
            opts=after_account,
        )
        self.job = BudgetJob(
            cli_args=("--cloud", "gcp", "--subscription", subscription_path(project, subscription_id)),
            sa_annotations={"iam.gke.io/gcp-service-account": email},
        )
        self.register_outputs(
            {"topic": self.topic_path, "subscription": subscription_path(project, subscription_id)}
        )
