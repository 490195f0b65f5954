package mail

const MaxIdleSessions = maxIdleSessions
