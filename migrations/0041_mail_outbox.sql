-- Mail to people (their invitations), queued in the transaction of what it
-- says and sent by whichever instance claims it, retried until sent. The
-- body holds a one-time link: it is sealed under the store's personal-data
-- key (the store never holds it) and cleared once the message is sent.
CREATE TABLE mail_outbox (
    id TEXT PRIMARY KEY,
    to_address TEXT NOT NULL,
    subject TEXT NOT NULL,
    body TEXT,
    created_at BIGINT NOT NULL,
    next_at BIGINT NOT NULL,
    claimed_until BIGINT,
    attempts BIGINT NOT NULL DEFAULT 0,
    last_error TEXT,
    sent_at BIGINT
);
CREATE INDEX mail_outbox_due ON mail_outbox (sent_at, next_at);
