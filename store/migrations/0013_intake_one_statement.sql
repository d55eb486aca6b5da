-- A fresh create-payment request is one autocommit statement (store/intake_store.cpp,
-- intake_once): it claims the key with its 202 already in the row, inserts the payment and its
-- outbox event, and reads the key's record when the key was taken. When the key is new but the
-- merchant reference is taken, the statement must not commit the claim: it calls this function,
-- whose error (SQLSTATE PR409) undoes the whole statement, and the intake runs its transactional
-- path, which stores the 409. VOLATILE so that the planner never evaluates it ahead of time.
CREATE FUNCTION payrecon_intake_reference_taken() RETURNS boolean
    LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    RAISE EXCEPTION 'the merchant reference is taken; the intake takes its transactional path'
        USING ERRCODE = 'PR409';
END
$$;
