-- The single-column CHECKs of the tables every payment writes become domains: the same rules,
-- checked on every write as before. Why: PostgreSQL reads a table CHECK's expression from its
-- stored text (stringToNode) and compiles it again on every statement that writes the table,
-- while a domain's constraints are read once per connection (the type cache). With 18 CHECKs on
-- payments and idempotency_records, the create statement spent about a quarter of its database
-- time there (bench/intake: pgbench on payrecon's SQL at 0.74-0.80 of the lean tables with the
-- CHECKs, 0.92 without; bench/README.md). The CHECKs that relate two columns stay on their tables.
-- Changing a column to a domain over its own type rewrites no row; each row is checked once.

CREATE DOMAIN payment_state AS text
    CHECK (VALUE IN ('pending', 'processing', 'succeeded', 'failed', 'retry_scheduled', 'unknown',
                     'needs_review'));
CREATE DOMAIN review_code AS text
    CHECK (VALUE IN ('no_lookup', 'lookup_failing', 'outside_key_window', 'no_idempotency',
                     'schedule_exhausted', 'remote_mismatch', 'remote_duplicate', 'requires_action',
                     'remote_unrecognised', 'request_rejected'));
CREATE DOMAIN attempt_outcome AS text
    CHECK (VALUE IN ('succeeded', 'declined', 'pending', 'not_sent', 'unknown', 'rejected'));
CREATE DOMAIN positive_minor_units AS bigint CHECK (VALUE > 0);
CREATE DOMAIN minor_units AS bigint CHECK (VALUE >= 0);
CREATE DOMAIN currency_code AS text CHECK (VALUE ~ '^[A-Z]{3}$');
CREATE DOMAIN merchant_reference AS text CHECK (octet_length(VALUE) BETWEEN 1 AND 255);
CREATE DOMAIN provider_name AS text
    CHECK (VALUE ~ '^[a-z0-9_-]+$' AND octet_length(VALUE) <= 32);
CREATE DOMAIN operation_id AS text
    CHECK (VALUE ~ '^[\x21-\x7e]+$' AND octet_length(VALUE) <= 45);
CREATE DOMAIN idempotency_key AS text
    CHECK (VALUE ~ '^[\x21-\x7e]+$' AND octet_length(VALUE) <= 255);
CREATE DOMAIN operation_name AS text CHECK (VALUE ~ '^[a-z_]+$' AND octet_length(VALUE) <= 64);
CREATE DOMAIN sha256_digest AS bytea CHECK (octet_length(VALUE) = 32);
CREATE DOMAIN http_status_code AS integer CHECK (VALUE BETWEEN 100 AND 599);
CREATE DOMAIN stored_response AS text CHECK (octet_length(VALUE) <= 65536);
CREATE DOMAIN attempt_detail AS text CHECK (octet_length(VALUE) <= 4096);
CREATE DOMAIN attempt_number AS integer CHECK (VALUE > 0);

ALTER TABLE payments
    DROP CONSTRAINT payments_state_check,
    DROP CONSTRAINT payments_review_code_check,
    DROP CONSTRAINT payments_amount_minor_check,
    DROP CONSTRAINT payments_charged_amount_minor_check,
    DROP CONSTRAINT payments_currency_check,
    DROP CONSTRAINT payments_merchant_reference_check,
    DROP CONSTRAINT payments_provider_check,
    DROP CONSTRAINT payments_operation_id_check,
    DROP CONSTRAINT payments_idempotency_key_hash_check,
    ALTER COLUMN state TYPE payment_state,
    ALTER COLUMN review_code TYPE review_code,
    ALTER COLUMN amount_minor TYPE positive_minor_units,
    ALTER COLUMN charged_amount_minor TYPE minor_units,
    ALTER COLUMN currency TYPE currency_code,
    ALTER COLUMN merchant_reference TYPE merchant_reference,
    ALTER COLUMN provider TYPE provider_name,
    ALTER COLUMN operation_id TYPE operation_id,
    ALTER COLUMN idempotency_key_hash TYPE sha256_digest;

ALTER TABLE idempotency_records
    DROP CONSTRAINT idempotency_records_request_hash_check,
    DROP CONSTRAINT idempotency_records_response_status_check,
    DROP CONSTRAINT idempotency_records_response_body_check,
    DROP CONSTRAINT idempotency_records_idempotency_key_check,
    DROP CONSTRAINT idempotency_records_operation_check,
    ALTER COLUMN request_hash TYPE sha256_digest,
    ALTER COLUMN response_status TYPE http_status_code,
    ALTER COLUMN response_body TYPE stored_response,
    ALTER COLUMN idempotency_key TYPE idempotency_key,
    ALTER COLUMN operation TYPE operation_name;

ALTER TABLE payment_attempts
    DROP CONSTRAINT payment_attempts_attempt_no_check,
    DROP CONSTRAINT payment_attempts_detail_check,
    DROP CONSTRAINT payment_attempts_outcome_check,
    ALTER COLUMN attempt_no TYPE attempt_number,
    ALTER COLUMN detail TYPE attempt_detail,
    ALTER COLUMN outcome TYPE attempt_outcome;
