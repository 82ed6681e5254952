"""The stream model's tests (tests/stream_model/): the model itself held to the documentation and moto, and the shipped
aggregator, the reference design and the naive designs played through it. They live apart from aggregator/ because
they test the model as much as the aggregator (fake DynamoDB and Streams, delivery parity with the emulators' engine)
and `make test-model` runs three of them at length. Fixtures from tests/unit/conftest.py; none of their own.
"""
