"""VPC with private subnets for the nodes and public subnets only for NAT (one NAT outside prod)."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from infra.config import PlatformConfig
from infra.naming import tags
from infra.network import subnet_cidrs


class Network(pulumi.ComponentResource):
    private_subnet_ids: list[pulumi.Output[str]]
    vpc: aws.ec2.Vpc

    def __init__(
        self, name: str, cfg: PlatformConfig, cluster_name: str, opts: pulumi.ResourceOptions
    ) -> None:
        super().__init__("eu-ml-platform:aws:Network", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        zones = [f"{cfg.region}{letter}" for letter in "abc"[: cfg.network.availability_zones]]
        private_cidrs, public_cidrs = subnet_cidrs(cfg.network.cidr, len(zones))
        self.vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=cfg.network.cidr,
            enable_dns_hostnames=True,
            enable_dns_support=True,
            tags=tags(cfg, Name=f"{cfg.name}-vpc"),
            opts=child,
        )
        igw = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=self.vpc.id, tags=tags(cfg), opts=child)
        public_rt = aws.ec2.RouteTable(
            f"{name}-public",
            vpc_id=self.vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=igw.id)],
            tags=tags(cfg),
            opts=child,
        )
        # One NAT gateway costs ~35 EUR/month plus traffic; prod pays for one per zone to survive a zone loss.
        nat_count = len(zones) if cfg.is_prod else 1
        nats: list[aws.ec2.NatGateway] = []
        self.private_subnet_ids = []
        for i, zone in enumerate(zones):
            public = aws.ec2.Subnet(
                f"{name}-public-{zone}",
                vpc_id=self.vpc.id,
                cidr_block=public_cidrs[i],
                availability_zone=zone,
                map_public_ip_on_launch=False,
                tags=tags(cfg, **{"kubernetes.io/role/elb": "1"}),
                opts=child,
            )
            aws.ec2.RouteTableAssociation(
                f"{name}-public-{zone}", subnet_id=public.id, route_table_id=public_rt.id, opts=child
            )
            if i < nat_count:
                eip = aws.ec2.Eip(f"{name}-nat-{zone}", domain="vpc", tags=tags(cfg), opts=child)
                nats.append(
                    aws.ec2.NatGateway(
                        f"{name}-nat-{zone}",
                        allocation_id=eip.id,
                        subnet_id=public.id,
                        tags=tags(cfg),
                        opts=child,
                    )
                )
        for i, zone in enumerate(zones):
            private = aws.ec2.Subnet(
                f"{name}-private-{zone}",
                vpc_id=self.vpc.id,
                cidr_block=private_cidrs[i],
                availability_zone=zone,
                tags=tags(
                    cfg,
                    **{
                        "kubernetes.io/role/internal-elb": "1",
                        f"kubernetes.io/cluster/{cluster_name}": "shared",
                    },
                ),
                opts=child,
            )
            route_table = aws.ec2.RouteTable(
                f"{name}-private-{zone}",
                vpc_id=self.vpc.id,
                routes=[
                    aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", nat_gateway_id=nats[i % len(nats)].id)
                ],
                tags=tags(cfg),
                opts=child,
            )
            aws.ec2.RouteTableAssociation(
                f"{name}-private-{zone}", subnet_id=private.id, route_table_id=route_table.id, opts=child
            )
            self.private_subnet_ids.append(private.id)
        self.register_outputs({"vpc_id": self.vpc.id})
