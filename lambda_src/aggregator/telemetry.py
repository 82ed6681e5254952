"""The aggregator's one logger and one metrics set, which every module of the function writes to."""

from aws_lambda_powertools import Logger, Metrics

logger = Logger()
metrics = Metrics()
