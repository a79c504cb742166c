-- mod_lessons sample data: a small German curriculum for demos, written
-- for English-speaking learners (3-4 lessons per level, A1 to C2).
-- Portable: runs unchanged on SQLite and PostgreSQL, after the schema.
-- Safe to run twice: the lessons are inserted only into an empty table,
-- and the drafts are marked inactive by an UPDATE that can repeat.

INSERT INTO lessons (level_id, title, sort_order, topic, description)
SELECT column1, column2, column3, column4, column5
FROM (VALUES
    -- A1 Beginner
    (1, 'Sich vorstellen – Introducing yourself', 1, 'Greetings',
     'Greetings for different times of day and the present tense of sein and heißen, with formal Sie versus informal du. Example: „Hallo, ich heiße Anna. Ich komme aus Kanada.“ – „Freut mich! Wie heißen Sie?“'),
    (1, 'Zahlen und Uhrzeit – Numbers and telling the time', 2, 'Numbers and time',
     'Numbers from 0 to 100 (note the reversed order in einundzwanzig, „one-and-twenty“) and asking the time. Watch out: „Es ist halb drei“ means 2:30, not 3:30.'),
    (1, 'Meine Familie – Family and articles', 3, 'Family',
     'Family vocabulary with the three genders der, die, das, the indefinite articles ein and eine, and the possessives mein and dein. Example: „Das ist meine Schwester. Mein Bruder heißt Tom.“'),
    (1, 'Im Café bestellen – Ordering at a café', 4, 'Food and drink',
     'Ordering politely with möchten and the accusative case, where ein becomes einen for masculine nouns. Example: „Ich möchte einen Kaffee und ein Stück Kuchen, bitte.“ – „Zahlen, bitte!“'),

    -- A2 Elementary
    (2, 'Was hast du am Wochenende gemacht? – Talking about the past', 1, 'Perfect tense',
     'The spoken past tense (Perfekt) with haben or sein and the past participle at the end of the clause; verbs of movement take sein. Example: „Ich habe lange geschlafen und bin dann ins Kino gegangen.“'),
    (2, 'Wie komme ich zum Bahnhof? – Asking for directions', 2, 'Directions',
     'Asking the way and understanding directions: the formal imperative, ordinal numbers, and the contractions zum and zur after zu, which always takes the dative. Example: „Gehen Sie geradeaus und nehmen Sie dann die zweite Straße links.“'),
    (2, 'Beim Arzt – At the doctor''s', 3, 'Health',
     'Parts of the body and describing symptoms with the dative („Mir tut der Kopf weh“), plus advice with the modal verbs müssen, sollen and dürfen. Example: „Sie sollten viel Wasser trinken und dürfen heute keinen Sport machen.“'),
    (2, 'Wohnung und Möbel – Home and furniture', 4, 'Home',
     'Rooms and furniture with the two-way prepositions: accusative for movement (stellen, legen), dative for position (stehen, liegen). Example: „Ich stelle die Lampe auf den Tisch. Jetzt steht die Lampe auf dem Tisch.“'),

    -- B1 Intermediate
    (3, 'Weil, dass, obwohl – Giving reasons', 1, 'Subordinate clauses',
     'Subordinating conjunctions send the conjugated verb to the end of the clause. Example: „Ich lerne Deutsch, weil ich in Berlin arbeiten möchte.“ – „Obwohl es regnet, gehen wir spazieren.“'),
    (3, 'Wenn ich Zeit hätte … – Wishes and hypotheticals', 2, 'Subjunctive II',
     'Konjunktiv II for wishes, polite requests and unreal conditions: würde plus infinitive and the common forms hätte, wäre and könnte. Example: „Wenn ich mehr Zeit hätte, würde ich öfter reisen.“ – „Könnten Sie mir bitte helfen?“'),
    (3, 'Die Bewerbung – Applying for a job', 3, 'Work',
     'Vocabulary from job advertisements, the formal register of a cover letter, and reflexive verbs with fixed prepositions. Example: „Sehr geehrte Damen und Herren, ich interessiere mich für die Stelle als Projektleiterin.“'),
    (3, 'Relativsätze – Describing people and things', 4, 'Relative clauses',
     'Relative pronouns take their gender from the noun and their case from their role in the relative clause, and the verb goes to the end. Example: „Der Mann, der dort steht, ist mein Lehrer.“ – „Das Buch, das du mir geschenkt hast, ist spannend.“'),

    -- B2 Upper Intermediate
    (4, 'Das Passiv – Processes and procedures', 1, 'Passive voice',
     'The werden-passive in present and past, the agent with von, and the state passive with sein. Example: „Das Rathaus wurde 1890 gebaut.“ – „Die Bibliothek ist sonntags geschlossen.“'),
    (4, 'Nachrichten verstehen – Following the news', 2, 'Media',
     'Reported speech with Konjunktiv I, as used in news reports, falling back to Konjunktiv II where the forms match the indicative. Example: „Der Minister sagte, er sei mit dem Ergebnis zufrieden.“ – „Die Bürger sagen, sie hätten keine Zeit.“'),
    (4, 'Argumentieren – Discussing pros and cons', 3, 'Argumentation',
     'Two-part connectors for structured arguments: einerseits … andererseits, zwar … aber, sowohl … als auch, je … desto. Example: „Zwar ist das Auto bequem, aber die Bahn ist umweltfreundlicher.“ – „Je früher wir handeln, desto besser.“'),
    (4, 'Umwelt und Nachhaltigkeit – Environment and sustainability', 4, 'Environment',
     'Environmental vocabulary with infinitive clauses of purpose and manner: um … zu, ohne … zu, statt … zu. Example: „Ich fahre mit dem Fahrrad zur Arbeit, um Energie zu sparen.“'),

    -- C1 Advanced
    (5, 'Nominalstil – Formal and academic writing', 1, 'Nominalisation',
     'Turning verbal clauses into noun phrases, as formal texts do, often with genitive prepositions such as aufgrund, trotz and während. Example: „weil die Preise gestiegen sind“ becomes „aufgrund des Preisanstiegs“.'),
    (5, 'Erweiterte Partizipialattribute – Extended participle phrases', 2, 'Participles',
     'Reading long attributes placed between the article and the noun, common in newspapers and academic prose. Example: „die seit Jahren steigenden Mieten“ – „das von der Regierung vorgeschlagene Gesetz“.'),
    (5, 'Redewendungen – Everyday idioms', 3, 'Idioms',
     'Common idioms, what they mean and when to use them. Example: „Ich verstehe nur Bahnhof“ (it''s all Greek to me), „Ich drücke dir die Daumen“ (I''ll keep my fingers crossed), „Das ist nicht mein Bier“ (not my problem).'),
    (5, 'Ein Referat halten – Giving a presentation', 4, 'Presentations',
     'Phrases that structure a talk, from the introduction through the transitions to the conclusion. Example: „Im Folgenden möchte ich auf drei Aspekte eingehen.“ – „Zusammenfassend lässt sich sagen, dass …“'),

    -- C2 Proficiency
    (6, 'Modalpartikeln – The small words doch, ja, halt, eben', 1, 'Modal particles',
     'How untranslatable particles change the tone of a sentence: softening, emphasising or expressing resignation. Example: „Komm doch mal vorbei!“ – „Das ist ja interessant.“ – „Das ist halt so.“'),
    (6, 'Register und Varietäten – Formal, colloquial and regional German', 2, 'Register and variety',
     'Moving between registers and recognising Austrian and Swiss Standard German. Example: „Grüß Gott“ and „Jänner“ in Austria, „Grüezi“ and „Velo“ in Switzerland, „Moin“ in the north.'),
    (6, 'Literarische Texte lesen – Reading literary prose', 3, 'Literature',
     'The narrative past (Präteritum and Plusquamperfekt) and long, nested sentences in classic prose. Example, the opening of Kafka''s „Die Verwandlung“: „Als Gregor Samsa eines Morgens aus unruhigen Träumen erwachte, fand er sich in seinem Bett zu einem ungeheueren Ungeziefer verwandelt.“'),
    (6, 'Wortbildung und Wortspiel – Word formation and wordplay', 4, 'Word formation',
     'Compounds, prefixes and the verbs whose meaning depends on whether the prefix separates. Example: „Er fährt das Schild um“ (he knocks the sign down) versus „Er umfährt das Schild“ (he drives around the sign).')
) AS sample
WHERE NOT EXISTS (SELECT 1 FROM lessons);

-- Drafts, not yet shown to learners.  (1 = 0) is false on both engines.
UPDATE lessons SET is_active = (1 = 0)
WHERE title = 'Umwelt und Nachhaltigkeit – Environment and sustainability';
UPDATE lessons SET is_active = (1 = 0)
WHERE title = 'Wortbildung und Wortspiel – Word formation and wordplay';
