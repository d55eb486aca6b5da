-- The nightly's watch over authorisations (issue 32): when it last told that an authorisation
-- expires within its horizon (payment.authorization_expiring goes out once per authorisation),
-- and an index over the authorisations still open -- manual, neither voided nor marked expired --
-- by when they expire, so that the watch reads those and nothing else.
ALTER TABLE payments ADD COLUMN authorization_expiry_warned_at timestamptz;

CREATE INDEX payments_open_authorizations ON payments (authorization_expires_at)
    WHERE capture_method = 'manual' AND authorization_expired_at IS NULL AND voided_at IS NULL;

COMMENT ON INDEX payments_open_authorizations IS
    'nightly: the authorisation watch reads the open manual authorisations by expiry (store/authorization_store); '
    'a payment captured at once never enters it';
